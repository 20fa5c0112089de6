import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { OracleEvent } from '../../bench/simulator/oracle.js';
import { pipelines } from '../../pipelines/index.js';
import { ShardAggregator, type ShardOptions } from '../../src/aggregate/shard.js';
import { Bus } from '../../src/bus/bus.js';
import { encodeEvent, frameMessage, type WireEvent } from '../../src/bus/wire.js';
import { flushTiers } from '../../src/flush/flusher.js';
import { serveHistory } from '../../src/flush/history-service.js';
import { createLogger } from '../../src/log.js';
import { registry } from '../../src/metrics.js';
import { Store } from '../../src/store/store.js';
import { compareWithOracle, storeAnswers } from '../helpers/compare.js';
import { drained, eventually, natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// A session leaves an aggregator's memory after two hours without events (AGGREGATE_SESSION_RETAIN_MS). A late event
// for it must still change every answer exactly as if it had come on time: the aggregator asks the store for the
// session's stored events first.
// Here sessions leave memory after 30 minutes, and the answers are checked against the oracle, which keeps nothing
// out of memory; then again after a rebuild without a checkpoint, which must ask the same questions. A session that
// left memory and then continues with recent events (a long pause) is recalled too.

const log = createLogger('error');
const prefix = uniquePrefix();
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
await bus.ensureStreams(1, 48);
const dir = mkdtempSync(join(tmpdir(), 'darshak-late-history-'));
const store = await Store.open({ clickhouse_url: '', data_dir: dir, events_retention_days: 30 }, log);
const flusher = flushTiers(bus, store, log);
await flusher.start();
const history = serveHistory(bus, store, log);
t.teardown(async () => {
  if (!history.isClosed()) await history.drain();
  await flusher.stop();
  await store.close();
  await bus.close();
  await removeNamespace(prefix);
  rmSync(dir, { recursive: true, force: true });
});

const options: ShardOptions = {
  pipelines,
  checkpointEveryMs: 3_600_000,
  flushIntervalMs: 100,
  maxInflight: 4,
  sessionRetainMs: 30 * 60_000,
  snapshotEveryMs: 60_000,
};
const minute = 60_000;
const now = Math.floor(Date.now() / minute) * minute;
const t0 = now - 5 * 60 * minute;
let n = 0;
const event = (type: string, ts: number, received: number, extra: Partial<WireEvent> = {}): WireEvent => ({
  tenant: 'acme',
  env: 'production',
  event_type: type,
  ts,
  client_ts: ts,
  received_at: received,
  event_id: `e${++n}`,
  user_id: 'u1',
  content_id: 'match',
  country: 'IN',
  region: 'Kerala',
  device: 'tv',
  session_id: 'a',
  ...extra,
});

const sent: WireEvent[] = [];
/** What the oracle reads: the client's view, with the enrichment ingest would have made from it. */
const asSent = (): OracleEvent[] =>
  sent.map((e) => ({ ...e, context: { region: e.region, country: e.country, device_type: e.device } }));
async function send(events: WireEvent[]): Promise<void> {
  const encoded = events.map(encodeEvent);
  await bus.js.publish(
    bus.names.eventsSubject(0),
    frameMessage(
      encoded,
      encoded.reduce((s, b) => s + b.length, 0),
    ),
  );
  sent.push(...events);
}

/** Session `a`, five minutes of play with a stall, received on time five hours ago. */
const sessionA = (): WireEvent[] => {
  const at = (s: number): number => t0 + s * 1000;
  return [
    event('play_start', at(0), at(0), { properties: { duration_sec: 600 } }),
    event('first_frame', at(2), at(2), { position_sec: 0 }),
    ...Array.from({ length: 29 }, (_, i) =>
      event('heartbeat', at(10 + i * 10), at(10 + i * 10), { position_sec: 8 + i * 10 }),
    ),
    event('rebuffer_start', at(120), at(120), { position_sec: 118 }),
    event('rebuffer_end', at(125), at(125), { position_sec: 118 }),
  ];
};

/** Other viewers for the hours since, received as they watched: they move the shard's clock past `a`'s retention. */
const others = (from: number, to: number): WireEvent[] =>
  Array.from({ length: Math.floor((to - from) / (5 * minute)) }, (_, i) => {
    const ts = from + i * 5 * minute;
    return event(i % 2 === 0 ? 'play_start' : 'heartbeat', ts, ts, {
      session_id: `o${Math.floor(i / 2)}`,
      user_id: `v${i}`,
      region: 'Goa',
      device: 'mobile',
    });
  });

async function settled(): Promise<void> {
  await eventually(() => drained(prefix, 1), 30_000, 100);
}

/** Sessions recalled from the store so far, by whether it held events of them. */
async function recalledSessions(): Promise<{ found: number; none: number }> {
  const values = (await registry.getSingleMetric('darshak_aggregate_recalled_sessions_total')!.get()).values;
  const of = (outcome: string): number => values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
  return { found: of('found'), none: of('none') };
}

t.test('late events for a session no longer in memory count as if they had come on time', async (t) => {
  const shard = new ShardAggregator(bus, 0, options, log);
  await shard.start();
  await send(sessionA());
  await send(others(t0 + 10 * minute, now - minute));
  await settled();
  t.same(await recalledSessions(), { found: 0, none: 0 }, 'nothing recalled while events come on time');

  // Late, and each needs a's stored events: a stall inside the session (its watch time and rebuffering move), a
  // region from before a's first event (every segment moves), and the session's end, beyond its last heartbeat.
  await send([
    event('rebuffer_start', t0 + 200_500, now, { position_sec: 198 }),
    event('rebuffer_end', t0 + 204_500, now, { position_sec: 198 }),
  ]);
  await send([event('heartbeat', t0 - 1, now, { region: 'Karnataka', position_sec: 0 })]);
  await send([event('session_end', t0 + 310_000, now, { position_sec: 295 })]);
  // A late session never seen before: the store has nothing of it.
  await send([
    event('play_start', t0 + 60_000, now, { session_id: 'b', user_id: 'u2' }),
    event('first_frame', t0 + 61_000, now, { session_id: 'b', user_id: 'u2' }),
  ]);
  await settled();
  t.same(
    await recalledSessions(),
    { found: 1, none: 1 },
    'a recalled once (then held again), b asked for and not found',
  );
  await compareWithOracle(t, storeAnswers(store.client), asSent(), ['acme']);
  await shard.stop();
});

t.test('a rebuild without a checkpoint asks the store the same questions', async (t) => {
  // Without its checkpoint the shard replays the last day of input: the late events find a's stored events up to
  // their own input, not the ones that came later.
  await (await bus.objectStore(bus.names.checkpointBucket)).delete('shard-0');
  const shard = new ShardAggregator(bus, 0, options, log);
  await shard.start();
  t.same(await recalledSessions(), { found: 2, none: 2 }, 'the rebuild asked again');
  await send([
    event('pause', t0 + 250_000, now + 1000, { position_sec: 240 }),
    event('resume', t0 + 260_000, now + 1000, { position_sec: 240 }),
  ]);
  await settled();
  await compareWithOracle(t, storeAnswers(store.client), asSent(), ['acme']);
  await shard.stop();
});

t.test(
  'while no flush process answers, the shard waits for the stored events rather than go on without them',
  async (t) => {
    await history.drain();
    const shard = new ShardAggregator(bus, 0, options, log);
    await shard.start();
    const before = await recalledSessions();
    // A late session the shard does not hold: it must ask, and no one answers.
    await send([
      event('play_start', t0 + 120_000, now + 2000, { session_id: 'c', user_id: 'u3' }),
      event('first_frame', t0 + 122_000, now + 2000, { session_id: 'c', user_id: 'u3' }),
    ]);
    await new Promise((r) => setTimeout(r, 2500));
    t.notOk(await drained(prefix, 1), 'the message waits');
    const again = serveHistory(bus, store, log);
    t.teardown(() => again.drain());
    await settled();
    t.same(
      await recalledSessions(),
      { found: before.found, none: before.none + 1 },
      'answered once a flush process is back',
    );
    await compareWithOracle(t, storeAnswers(store.client), asSent(), ['acme']);
    await shard.stop();
  },
);

t.test('a session that left memory and continues with recent events takes up where it stopped', async (t) => {
  const again = serveHistory(bus, store, log);
  t.teardown(() => again.drain());
  const shard = new ShardAggregator(bus, 0, options, log);
  await shard.start();
  const before = await recalledSessions();
  // Session r plays for a minute, two hours ago (late, so asked for once: nothing stored yet) ...
  const r0 = now - 120 * minute;
  const r = { session_id: 'r', user_id: 'u9', content_id: 'replay', region: 'Karnataka' };
  await send([
    event('play_start', r0, r0, { ...r, properties: { duration_sec: 900 } }),
    event('first_frame', r0 + 1000, r0 + 1000, { ...r, position_sec: 0 }),
    ...Array.from({ length: 6 }, (_, i) =>
      event('heartbeat', r0 + (i + 1) * 10_000, r0 + (i + 1) * 10_000, { ...r, position_sec: (i + 1) * 10 }),
    ),
  ]);
  // ... another viewer moves the shard's clock on past r's retention, and r leaves memory (its events stored, as
  // they would be in the day it takes) ...
  await settled();
  const later = now + 11 * minute;
  await send([event('play_start', now - 40_000, later, { session_id: 'w', user_id: 'u10' })]);
  await settled();
  const remembered = (await registry.getSingleMetric('darshak_aggregate_remembered_sessions')!.get()).values.find(
    (v) => v.labels.shard === '0',
  );
  t.ok(
    remembered && remembered.value >= 1,
    `the shard remembers ${remembered?.value} sessions that left, r among them`,
  );
  // ... the shard restarts from its checkpoint, which must remember that r left ...
  await shard.stop();
  const restarted = new ShardAggregator(bus, 0, options, log);
  await restarted.start();
  // ... then r plays on, on time: its heartbeats name neither its content nor its viewer, and its region is unknown.
  await send(
    Array.from({ length: 3 }, (_, i) =>
      event('heartbeat', now - 30_000 + i * 10_000, later + 1000, {
        session_id: 'r',
        user_id: undefined,
        content_id: undefined,
        region: '',
        country: '',
        device: '',
        position_sec: 70 + i * 10,
      }),
    ),
  );
  await settled();
  t.same(
    await recalledSessions(),
    { found: before.found + 1, none: before.none + 1 },
    'r asked for when it came late, and again when it came back',
  );
  await compareWithOracle(t, storeAnswers(store.client), asSent(), ['acme']);
  await restarted.stop();
});

t.test('a recall waits until the store holds the session it asks for, after a flush outage', async (t) => {
  const again = serveHistory(bus, store, log);
  t.teardown(() => again.drain());
  // The flush role is down: the shard's output gathers in the raw stream, unwritten.
  await flusher.stop();
  const shard = new ShardAggregator(bus, 0, options, log);
  await shard.start();
  const before = await recalledSessions();
  const shardDone = async (): Promise<void> => {
    t.ok((await eventually(() => drained(prefix, 1, natsUrl, false), 30_000, 100)) >= 0, 'the shard passed it on');
  };
  // Session q plays for a minute ...
  const q = { session_id: 'q', user_id: 'u11', content_id: 'final', region: 'Assam' };
  const q0 = now - 5 * minute;
  const qAt = now + 12 * minute;
  await send([
    event('play_start', q0, qAt, { ...q, properties: { duration_sec: 1200 } }),
    event('first_frame', q0 + 1000, qAt, { ...q, position_sec: 0 }),
    ...Array.from({ length: 6 }, (_, i) =>
      event('heartbeat', q0 + (i + 1) * 10_000, qAt + (i + 1) * 10_000, { ...q, position_sec: (i + 1) * 10 }),
    ),
  ]);
  await shardDone();
  // ... leaves memory while others watch on, past its retention (its events still unwritten) ...
  await send([event('play_start', now - 20_000, qAt + 45 * minute, { session_id: 'x', user_id: 'u12' })]);
  await shardDone();
  // ... and plays on: the store lacks its first minute, so the shard must wait for it rather than count q afresh.
  await send(
    Array.from({ length: 3 }, (_, i) =>
      event('heartbeat', q0 + (7 + i) * 10_000, qAt + 46 * minute, { ...q, position_sec: 70 + i * 10 }),
    ),
  );
  await new Promise((r) => setTimeout(r, 2500));
  t.notOk(await drained(prefix, 1, natsUrl, false), 'the message waits while the store is behind');
  t.same(await recalledSessions(), before, 'nothing recalled yet');
  const back = flushTiers(bus, store, log);
  await back.start();
  t.teardown(() => back.stop());
  await settled();
  t.same(await recalledSessions(), { found: before.found + 1, none: before.none }, 'q recalled once it is written');
  await compareWithOracle(t, storeAnswers(store.client), asSent(), ['acme']);
  await shard.stop();
});

t.test('a session let go of and recalled before its output is published is recalled from that output', async (t) => {
  const again = serveHistory(bus, store, log);
  const flushing = flushTiers(bus, store, log);
  await flushing.start();
  t.teardown(async () => {
    await again.drain();
    await flushing.stop();
  });
  const before = await recalledSessions();
  // As a shard catching up on a backlog reads it: session s, then (past s's retention) another viewer, in one
  // message, so s leaves memory with its events not yet sealed; then s plays on, in the next message. Both are read
  // within one flush interval, so the recall comes before any batch holding s's events is out.
  const s = { session_id: 's', user_id: 'u13', content_id: 'final', region: 'Bihar' };
  const s0 = now - minute;
  const sAt = now + 70 * minute;
  await send([
    event('play_start', s0, sAt, { ...s, properties: { duration_sec: 1200 } }),
    event('first_frame', s0 + 1000, sAt, { ...s, position_sec: 0 }),
    event('heartbeat', s0 + 10_000, sAt + 10_000, { ...s, position_sec: 9 }),
    event('play_start', now - 10_000, sAt + 45 * minute, { session_id: 'y', user_id: 'u14' }),
  ]);
  await send([event('heartbeat', s0 + 20_000, sAt + 46 * minute, { ...s, position_sec: 19 })]);
  const shard = new ShardAggregator(bus, 0, { ...options, flushIntervalMs: 5000 }, log);
  await shard.start();
  await settled();
  t.same(await recalledSessions(), { found: before.found + 1, none: before.none }, 's recalled, and found');
  await compareWithOracle(t, storeAnswers(store.client), asSent(), ['acme']);
  await shard.stop();
});
