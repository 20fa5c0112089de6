import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { PrivateNats } from '../../bench/private-nats.js';
import { Bus } from '../../src/bus/bus.js';
import { encodeFlushed } from '../../src/bus/progress.js';
import { LoadShedder } from '../../src/ingest/load-shedder.js';
import { createLogger } from '../../src/log.js';
import { eventually, freePort, natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// Ingest's load shedding (docs/ingest.md, "Overload"), driven by a clock of the test's and the flush role's progress
// messages sent over a real NATS: lag is the age of the oldest published message not yet stored; past the target,
// admission follows what the pipeline drains, shared max-min fairly between tenants; nothing is shed while no flush
// role speaks (the stream buffers while the pipeline restarts).

const prefix = uniquePrefix();
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, createLogger('error'));
t.teardown(async () => {
  await bus.close();
  await removeNamespace(prefix);
});

let clock = 1_000_000;
const shedder = (): LoadShedder => new LoadShedder(bus, 2, { targetLagMs: 2000, maxLagMs: 10_000 }, () => clock);

/** Tell the shedders on `on`, through NATS, that the store holds each shard's input up to these sequences. */
async function flushed(on: Pick<Bus, 'nc' | 'names'>, pairs: Array<[number, number]>): Promise<void> {
  on.nc.publish(on.names.flushedSubject, encodeFlushed(pairs));
  // The server sends the message back before the flush's PONG, and the subscription's callback runs as it is read.
  await on.nc.flush();
}

/** `ticks` ticks of 250 ms, with `perTick` messages of 100 events published on shard 0 each tick. */
function run(s: LoadShedder, ticks: number, seq: { next: number }, perTick = 0): void {
  for (let i = 0; i < ticks; i++) {
    for (let j = 0; j < perTick; j++) s.published(0, seq.next++, 100);
    clock += 250;
    s.tick();
  }
}

t.test('without word from a flush role nothing is shed, however old the oldest message', async (t) => {
  const s = shedder();
  t.teardown(() => s.stop());
  s.published(0, 1, 500);
  run(s, 400, { next: 2 });
  t.equal(s.lag, 100_000, 'the lag is measured');
  t.same(s.admit('acme'), { ok: true, value: null });
});

t.test(
  'past the target lag, admission follows the drain rate, fair between tenants; under it, everything passes',
  async (t) => {
    const s = shedder();
    t.teardown(() => s.stop());
    const seq = { next: 1 };
    // The pipeline stores 2 messages (200 events) a tick while 4 are published: 800 events/s drained, lag growing.
    let stored = 0;
    for (let i = 0; i < 40; i++) {
      run(s, 1, seq, 4);
      stored += 2;
      await flushed(bus, [[0, stored]]);
    }
    t.ok(s.lag > 2000, `behind: lag ${s.lag} ms`);
    // A heavy tenant asks 50 requests of 100 events a tick, a light one 1 every fourth tick (100 events/s).
    const counts = { heavy: { ok: 0, shed: 0 }, light: { ok: 0, shed: 0 } };
    let retryAfter = 0;
    for (let i = 0; i < 20; i++) {
      for (const [tenant, n] of [
        ['heavy', 50],
        ['light', i % 4 === 0 ? 1 : 0],
      ] as const) {
        for (let r = 0; r < n; r++) {
          const a = s.admit(tenant);
          if (a.ok) {
            counts[tenant].ok++;
            s.charge(tenant, 100);
          } else {
            counts[tenant].shed++;
            retryAfter = a.error.retryAfterSeconds;
          }
        }
      }
      // The pipeline stores 3 messages (300 events) a tick, with nothing new published: still behind after 20 ticks.
      run(s, 1, seq, 0);
      stored += 3;
      await flushed(bus, [[0, stored]]);
    }
    t.equal(counts.light.shed, 0, 'the light tenant is never shed');
    t.ok(counts.heavy.shed > counts.heavy.ok, `the heavy one is: ${JSON.stringify(counts.heavy)}`);
    // 20 ticks = 5 s at the drain rate (800 rising to 1,200 events/s): at most 6,000 events, 60 requests, between the
    // two tenants, and two first requests let in.
    t.ok(s.lag > 2000, `still behind: lag ${s.lag} ms`);
    t.ok(
      counts.heavy.ok + counts.light.ok <= 62,
      `admitted no more than drained: ${counts.heavy.ok + counts.light.ok} requests`,
    );
    t.ok(retryAfter >= 1 && retryAfter <= 30, `Retry-After ${retryAfter} s`);
    // Caught up: all stored.
    await flushed(bus, [[0, seq.next]]);
    run(s, 1, seq);
    t.equal(s.lag, 0);
    t.same(s.admit('heavy'), { ok: true, value: null }, 'admitted again once caught up');
  },
);

t.test('at the maximum lag nothing is admitted, and a stalled pipeline drains nothing', async (t) => {
  const s = shedder();
  t.teardown(() => s.stop());
  const seq = { next: 1 };
  run(s, 1, seq, 1);
  await flushed(bus, [[1, 1]]);
  run(s, 48, seq, 1);
  t.ok(s.lag >= 10_000, `lag ${s.lag}`);
  s.charge('acme', 100);
  run(s, 1, seq);
  await flushed(bus, [[1, 1]]);
  const answers = Array.from({ length: 20 }, () => s.admit('acme'));
  t.ok(
    answers.every((a) => !a.ok),
    'every request shed',
  );
  const behind = Math.ceil((s.lag - 2000) / 1000);
  t.ok(
    answers.every((a) => !a.ok && a.error.retryAfterSeconds === behind),
    `Retry-After says how far past the target the lag is (${behind} s)`,
  );
});

t.test(
  'while the bus is down, and for 30 s after it is back, the lag measures the outage: nothing is shed',
  async (t) => {
    // A server of its own, to kill: the outage is real, and so are the bus's disconnect and reconnect.
    const dir = await mkdtemp(join(tmpdir(), 'darshak-shed-'));
    const nats = new PrivateNats(await freePort(true), dir);
    await nats.start();
    const own = await Bus.connect({ nats_url: nats.url, nats_prefix: uniquePrefix() }, createLogger('silent'));
    const s = new LoadShedder(own, 1, { targetLagMs: 2000, maxLagMs: 10_000 }, () => clock);
    t.teardown(async () => {
      s.stop();
      await own.close();
      await nats.kill();
      await rm(dir, { recursive: true, force: true });
    });
    const seq = { next: 1 };
    // Far behind, a flush role speaking, and acme known (a tenant first seen while shedding goes through once).
    const behind = async (): Promise<void> => {
      await flushed(own, [[0, 0]]);
      run(s, 48, seq, 1);
      s.charge('acme', 100);
      run(s, 1, seq);
    };
    await behind();
    t.notOk(s.admit('acme').ok, 'past the maximum lag with a flush role speaking: shed');

    await nats.kill();
    t.not(await eventually(async () => !own.connected, 10_000, 20), -1, 'the bus saw the server go');
    t.ok(s.admit('acme').ok, 'admitted at once when the bus goes down (the publish answers ingest_degraded)');
    run(s, 8, seq);
    t.ok(s.lag > 10_000 && s.admit('acme').ok, `and while it stays down, the lag (${s.lag} ms) growing`);

    await nats.start();
    t.not(await eventually(async () => own.connected, 20_000, 20), -1, 'the bus is back');
    await behind();
    t.ok(s.admit('acme').ok, 'admitted just after the bus came back, far behind as the pipeline is');
    run(s, 30_000 / 250, seq);
    await behind();
    t.notOk(s.admit('acme').ok, '30 s later, still behind with a flush role speaking: shed again');
  },
);
