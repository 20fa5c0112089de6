import { setImmediate as tick } from 'node:timers/promises';
import t from 'tap';
import { Bus } from '../../src/bus/bus.js';
import { UsageCounters } from '../../src/control/usage.js';
import { createLogger } from '../../src/log.js';
import { natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// The per-tenant counts behind RateLimit-* and the monthly quota, shared by ingest processes through NATS KV.

const prefix = uniquePrefix();
const log = createLogger('error');
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
t.teardown(async () => {
  await bus.close();
  await removeNamespace(prefix);
});
// A sync interval far beyond the test: every write below is one the test starts.
const open = (): Promise<UsageCounters> => UsageCounters.open(bus, 3_600_000, log);

t.test('a count being written to the bucket is still counted while the write is in flight', async (t) => {
  const u = await open();
  t.teardown(() => u.close());
  const now = Date.now();
  u.add('acme', 5, now);
  for (let round = 1; round <= 3; round++) {
    let done = false;
    const synced = u.sync().then(() => (done = true));
    let checks = 0;
    // Every turn of the event loop until the write is acknowledged, and once after.
    do {
      checks++;
      if (u.minuteUsed('acme', now) !== 5 * round || u.monthUsed('acme', now) !== 5 * round) {
        t.fail(
          `round ${round}, check ${checks}: minute ${u.minuteUsed('acme', now)}, month ${u.monthUsed('acme', now)}, want ${5 * round}`,
        );
        break;
      }
      await tick();
    } while (!done);
    await synced;
    t.ok(checks > 1, `round ${round}: looked ${checks} times while the write was in flight`);
    u.add('acme', 5, now);
  }
  t.equal(u.minuteUsed('acme', now), 20, 'the last add, not yet written, counts too');
});

t.test('another process sees the written counts; taking back events counts them out', async (t) => {
  const [a, b] = await Promise.all([open(), open()]);
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const now = Date.now();
  a.add('beta', 7, now);
  b.add('beta', 4, now);
  b.remove('beta', 1, now);
  await Promise.all([a.sync(), b.sync()]);
  // Both wrote with compare-and-set against the same keys: one of them retried, and neither count is lost.
  for (let i = 0; i < 100 && (a.minuteUsed('beta', now) !== 10 || b.minuteUsed('beta', now) !== 10); i++)
    await new Promise((r) => setTimeout(r, 20));
  t.equal(a.minuteUsed('beta', now), 10);
  t.equal(b.minuteUsed('beta', now), 10);
  t.equal(a.monthUsed('beta', now), 10);
  t.equal(b.monthUsed('beta', now), 10);
});
