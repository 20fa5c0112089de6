import t from 'tap';
import { AckPolicy } from 'nats';
import { Bus } from '../../src/bus/bus.js';
import { consumeLoop } from '../../src/bus/consume-loop.js';
import { createLogger } from '../../src/log.js';
import { natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// The read loop every JetStream reader shares. A role that gets SIGTERM while it starts stops its loops before their
// first read is open: a CI soak saw the webhooks role still running 30 s after SIGTERM, its fan-out consumer idle.

const log = createLogger('error');
const prefix = uniquePrefix();
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
const stream = `${prefix}_loop`;
await bus.jsm.streams.add({ name: stream, subjects: [`${prefix}.loop.>`] });
await bus.jsm.consumers.add(stream, { durable_name: 'idle', ack_policy: AckPolicy.Explicit });
t.teardown(async () => {
  await bus.close();
  await removeNamespace(prefix);
});

/** Resolves to how long `p` took, or to null when it is still pending after `ms`. */
async function within(p: Promise<void>, ms: number): Promise<number | null> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((r) => (timer = setTimeout(() => r(null), ms)));
  const took = await Promise.race([p.then(() => Date.now() - t0), late]);
  clearTimeout(timer);
  return took;
}

for (const readAhead of [{ messages: 16 }, { bytes: 1 << 20 }]) {
  const mode = 'messages' in readAhead ? 'a count' : 'bytes';
  t.test(`read ahead by ${mode}: stop while the consumer is still being opened ends the loop at once`, async (t) => {
    let opened!: () => void;
    const opening = new Promise<void>((r) => (opened = r));
    const loop = consumeLoop({
      bus,
      open: async () => {
        await opening;
        return bus.js.consumers.get(stream, 'idle');
      },
      readAhead,
      handle: async (m) => void m.ack(),
      log,
      onFailure: 'read failed',
    });
    const stopping = loop.stop();
    opened();
    const took = await within(stopping, 5_000);
    t.not(took, null, 'stopped, with no message ever coming');
    t.ok(took === null || took < 2_000, `in ${took} ms`);
  });

  t.test(`read ahead by ${mode}: stop of an idle open read ends it at once`, async (t) => {
    const loop = consumeLoop({
      bus,
      open: () => bus.js.consumers.get(stream, 'idle'),
      readAhead,
      handle: async (m) => void m.ack(),
      log,
      onFailure: 'read failed',
    });
    await new Promise((r) => setTimeout(r, 300));
    const took = await within(loop.stop(), 5_000);
    t.not(took, null, 'stopped');
    t.ok(took === null || took < 2_000, `in ${took} ms`);
  });
}
