// Aggregation benchmark (npm run bench:aggregate). Four figures, each with the machine:
//
// 1. Throughput of one shard: N input messages of realistic playback events are written to a fresh namespace's
//    events stream, then one ShardAggregator (all pipelines) reads them from JetStream, de-duplicates, aggregates,
//    and publishes its sealed output (the input it passed on, by sequence, and snapshot rows) back to JetStream.
//    Events/s = events / time from start to the last batch acknowledged. In the same run: a bare msgpackr decode of
//    the same messages, a bare JetStream read of them (the ceiling of any shard on this machine), one shard with no
//    pipeline on them (the floor of a shard's own work, in a namespace of its own), and the runtime alone on them
//    (read and apply in-process, no bus and no de-duplication: what a rebuild replays).
// 2. Memory: 1,000,000 open sessions (play_start, first_frame, three heartbeats each) in the aggregator runtime;
//    heap growth per session after a full GC. (Needs --expose-gc; the npm script passes it.)
// 3. Freshness: `darshak start` in this process; one new session every 100 ms, sent with its `ts` now. Freshness
//    = time from the ingest acknowledgement to the moment the concurrency snapshot (concurrency_seconds, what the
//    concurrency query reads) counts it. p50/p99.
// 4. Flush: M output messages of a few dozen events each with their snapshot rows (what many shards sealing every
//    500 ms send at a moderate rate), already in the raw stream, their input in the event stream; a Flusher writes them
//    to the embedded store, in groups as it runs, and, in the same run on a stream of the same messages, one message per
//    group. Messages/s = messages / time from start to the last one acknowledged.
//
//   npm run bench:aggregate [-- --messages 400 --events-per-message 500 --playing 20000 --sessions 1000000 --probes 100
//                              --flush-messages 400 --flush-events 20 --skip x,y]

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Packr } from 'msgpackr';
import { pipelines } from '../pipelines/index.js';
import type { Pipeline } from '../src/metric/pipeline.js';
import { Aggregation } from '../src/aggregate/runtime.js';
import { batchInputLimit, ShardAggregator } from '../src/aggregate/shard.js';
import { Bus } from '../src/bus/bus.js';
import { EventReader } from '../src/bus/event-reader.js';
import { removeNamespace } from '../src/bus/namespace.js';
import {
  decodeMessage,
  decodeOutput,
  decodeSignals,
  encodeEvent,
  encodeRows,
  frameInput,
  frameMessage,
  frameOutput,
  type WireEvent,
} from '../src/bus/wire.js';
import { loadConfig } from '../src/config/load.js';
import { ControlPlane } from '../src/control/control-plane.js';
import { flushTiers } from '../src/flush/flusher.js';
import { createLogger } from '../src/log.js';
import { resolveTargets, Services, startModules } from '../src/modules.js';
import { registry } from '../src/registry.js';
import { Store } from '../src/store/store.js';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '400' },
    'events-per-message': { type: 'string', default: '500' },
    // Sessions the throughput run's events are spread over: fewer sessions, longer sessions (10 s between events).
    playing: { type: 'string', default: '20000' },
    sessions: { type: 'string', default: '1000000' },
    probes: { type: 'string', default: '100' },
    'flush-messages': { type: 'string', default: '400' },
    'flush-events': { type: 'string', default: '20' },
    skip: { type: 'string', default: '' },
  },
});
const gc = (globalThis as { gc?: () => void }).gc;
const skip = new Set((args.skip ?? '').split(',').filter(Boolean));
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = createLogger('warn');

console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${process.platform}`,
);

/** Sessions as a player sends them: a start, then heartbeats every 10 s, with a stall now and then. */
function playbackEvents(count: number, sessions: number, t0: number): WireEvent[] {
  const out: WireEvent[] = [];
  const steps = new Array<number>(sessions).fill(0);
  const regions = ['Maharashtra', 'Karnataka', 'Delhi', 'Tamil Nadu', 'West Bengal', 'Kerala'];
  for (let i = 0; out.length < count; i++) {
    const s = i % sessions;
    const step = steps[s]!++;
    const ts = t0 + (s % 10_000) + step * 10_000;
    const type =
      step === 0
        ? 'play_start'
        : step === 1
          ? 'first_frame'
          : step % 17 === 0
            ? 'rebuffer_start'
            : step % 17 === 1
              ? 'rebuffer_end'
              : 'heartbeat';
    out.push({
      tenant: 'bench',
      env: 'production',
      event_type: type,
      ts,
      client_ts: ts,
      received_at: ts,
      event_id: randomUUID(),
      country: 'IN',
      region: regions[s % regions.length]!,
      device: s % 3 === 0 ? 'tv' : 'mobile',
      session_id: `sess-${s}`,
      ...(step === 0
        ? { content_id: `match-${s % 5}`, user_id: `user-${s}`, properties: { duration_sec: 10_800 } }
        : {}),
      position_sec: step * 10,
      context: { pop: `pop-${s % 8}` },
    });
  }
  return out;
}

/** The input messages of the throughput run, as ingest frames them. */
function encodedMessages(messages: number, perMessage: number, sessions: number): Buffer[] {
  const events = playbackEvents(messages * perMessage, sessions, Date.now() - 3_600_000);
  const bodies: Buffer[] = [];
  for (let m = 0; m < messages; m++) {
    const encoded = events.slice(m * perMessage, (m + 1) * perMessage).map(encodeEvent);
    bodies.push(
      frameMessage(
        encoded,
        encoded.reduce((s, b) => s + b.length, 0),
      ),
    );
  }
  return bodies;
}

/** `fn` over a fresh namespace whose events stream holds `bodies` (shard 0), given the last one's sequence. */
async function withMessages<T>(bodies: readonly Buffer[], fn: (bus: Bus, last: number) => Promise<T>): Promise<T> {
  const prefix = `bench${randomUUID().slice(0, 8)}`;
  const config = loadConfig({
    env: { NODE_ENV: 'test' },
    overrides: { nats_url: natsUrl, nats_prefix: prefix, shards: 1 },
  });
  const bus = await Bus.connect(config, log, 'bench-aggregate');
  try {
    await bus.ensureStreams(1, 1);
    let last = 0;
    for (const b of bodies) last = (await bus.js.publish(bus.names.eventsSubject(0), b)).seq;
    return await fn(bus, last);
  } finally {
    await bus.close();
    await removeNamespace(natsUrl, prefix);
  }
}

/** Seconds one shard with `ps` takes from its start until the batch holding input `last` is wholly out. */
async function timeShard(bus: Bus, last: number, ps: readonly Pipeline[]): Promise<number> {
  const shard = new ShardAggregator(
    bus,
    0,
    {
      pipelines: ps,
      checkpointEveryMs: 3_600_000,
      flushIntervalMs: 500,
      maxInflight: 32,
      sessionRetainMs: 86_400_000,
      snapshotEveryMs: 60_000,
    },
    log,
  );
  // Garbage from before (the generated events, an earlier run) is collected now, not while the shard is timed.
  gc?.();
  const started = process.hrtime.bigint();
  await shard.start();
  // Done when the batch holding the last input is wholly out: its signals follow its parts. Asked of the small
  // signals message, not the raw one: fetching a raw message of some 100 KB (base64 in JSON) every 20 ms cost the
  // bench process a tenth of the shard's time.
  for (;;) {
    const m = await bus.jsm.streams
      .getMessage(bus.names.signalsStream, { last_by_subj: bus.names.signalsSubject(0) })
      .catch(() => null);
    if (m && decodeSignals(m.data).up_to >= last) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await shard.stop();
  return seconds;
}

async function throughput(): Promise<void> {
  const messages = Number(args.messages);
  const perMessage = Number(args['events-per-message']);
  const total = messages * perMessage;
  const bodies = encodedMessages(messages, perMessage, Number(args.playing));
  // The bare decode of the same messages, best of three passes.
  const packr = new Packr({ useRecords: false, moreTypes: false });
  let decodeRate = 0;
  for (let pass = 0; pass < 3; pass++) {
    const t = process.hrtime.bigint();
    let n = 0;
    for (const b of bodies) n += (packr.unpack(b) as { events: unknown[] }).events.length;
    decodeRate = Math.max(decodeRate, n / (Number(process.hrtime.bigint() - t) / 1e9));
  }
  const [seconds, readRate, sealAt] = await withMessages(bodies, async (bus, last) => {
    const s = await timeShard(bus, last, pipelines);
    // The ceiling this machine puts on any shard: the same messages read from JetStream by a private reader, as the
    // shard reads them, and nothing done with them.
    const consumer = await bus.reader(bus.names.eventsStream, bus.names.eventsSubject(0), { seq: 1 });
    const readStarted = process.hrtime.bigint();
    const reading = await consumer.consume({ max_messages: 256, expires: 10_000 });
    for await (const m of reading) if (m.seq >= last) break;
    const r = total / (Number(process.hrtime.bigint() - readStarted) / 1e9);
    reading.stop();
    await consumer.delete().catch(() => undefined);
    return [s, r, batchInputLimit(bus)];
  });
  // The shard's own work without any pipeline (the bus, de-duplication, the sessions' timelines, the output and its
  // acknowledgements): what every pipeline's work comes on top of.
  const floorSeconds = await withMessages(bodies, (bus, last) => timeShard(bus, last, []));
  const rate = total / seconds;
  console.log(
    `\n1. one shard, JetStream → dedup + ${pipelines.length} pipelines → sealed output acknowledged in JetStream (${Number(args.playing).toLocaleString()} sessions)`,
  );
  console.log(
    `   ${total.toLocaleString()} events in ${messages} messages: ${seconds.toFixed(2)} s = ${Math.round(rate).toLocaleString()} events/s`,
  );
  console.log(
    `   bare msgpackr decode of the same messages: ${Math.round(decodeRate).toLocaleString()} events/s; ratio ${((rate / decodeRate) * 100).toFixed(1)}%`,
  );
  console.log(
    `   bare JetStream read of the same messages (no work): ${Math.round(readRate).toLocaleString()} events/s; ratio ${((rate / readRate) * 100).toFixed(1)}%`,
  );
  console.log(
    `   one shard with no pipeline (bus, de-duplication, session timelines, output): ${Math.round(total / floorSeconds).toLocaleString()} events/s`,
  );
  const agg = new Aggregation(pipelines, 86_400_000);
  const reader = new EventReader();
  let sinceSeal = 0;
  const t = process.hrtime.bigint();
  bodies.forEach((b, i) => {
    for (const e of reader.read(b).events) agg.apply(e);
    // Drained as often as the shard seals here.
    sinceSeal += b.length;
    if (sinceSeal > sealAt) {
      agg.drainEncoded(i);
      sinceSeal = 0;
    }
  });
  const runtimeRate = total / (Number(process.hrtime.bigint() - t) / 1e9);
  console.log(
    `   the runtime alone (the shard's reader + pipelines + encoded rows, in-process, no bus, no de-duplication): ${Math.round(runtimeRate).toLocaleString()} events/s`,
  );
  console.log(`   target: ≥ 300,000 events/s: ${rate >= 300_000 ? 'met' : 'NOT met'}`);
}

function memory(): void {
  if (!gc) throw new Error('run with --expose-gc (npm run bench:aggregate does)');
  const sessions = Number(args.sessions);
  const agg = new Aggregation(pipelines, 86_400_000);
  gc();
  const before = process.memoryUsage().heapUsed;
  const t0 = Date.now() - 600_000;
  const started = process.hrtime.bigint();
  // Five events a session, fed in passes like live traffic, flushed (drained) every 50,000 events.
  let n = 0;
  for (let step = 0; step < 5; step++) {
    for (let s = 0; s < sessions; s++) {
      const ts = t0 + (s % 10_000) + step * 10_000;
      agg.apply({
        tenant: 'bench',
        env: 'production',
        event_type: step === 0 ? 'play_start' : step === 1 ? 'first_frame' : 'heartbeat',
        ts,
        client_ts: ts,
        received_at: ts,
        country: 'IN',
        region: 'Maharashtra',
        device: 'mobile',
        session_id: `sess-${s}`,
        ...(step === 0 ? { content_id: 'final', user_id: `user-${s}` } : {}),
        context: { pop: 'pop-1' },
      });
      if (++n % 50_000 === 0) agg.drain(n);
    }
  }
  agg.drain(n);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  console.log(`\n2. memory: ${agg.sessionCount.toLocaleString()} open sessions (5 events each) in the runtime`);
  console.log(
    `   heap +${(grown / 2 ** 20).toFixed(0)} MiB = ${Math.round(grown / sessions)} bytes/session; fed at ${Math.round(n / seconds).toLocaleString()} events/s in-process`,
  );
  console.log(
    `   target: 1,000,000 sessions in ≤ 1 GiB of heap: ${grown * (1_000_000 / sessions) <= 2 ** 30 ? 'met' : 'NOT met'}`,
  );
}

async function freshness(): Promise<void> {
  const probes = Number(args.probes);
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-bench-'));
  const config = loadConfig({
    env: { NODE_ENV: 'test' },
    overrides: {
      nats_url: natsUrl,
      nats_prefix: `bench${randomUUID().slice(0, 8)}`,
      data_dir: dataDir,
      ingest_port: 0,
      base_port: 0,
    },
  });
  const services = new Services(config, log);
  const started = await startModules(registry, resolveTargets(registry, 'all'), services);
  try {
    const control = await ControlPlane.open(services.get('bus'));
    await control.createTenant({
      slug: 'fresh',
      name: 'Fresh',
      plan: 'enterprise',
      ownerEmail: 'o@fresh.test',
      ownerPassword: 'correct horse battery',
    });
    const key = (await control.apiKeys.create({ tenant: 'fresh', name: 'bench', environment: 'production' })).key;
    const port = services.listeners.get('ingest')!.port;
    const client = services.get('store').client;
    const sent: number[] = [];
    const lags: number[] = [];
    for (let i = 0; i < probes; i++) {
      const ts = Date.now();
      const body = {
        sent_at: new Date(ts).toISOString(),
        events: [
          {
            event_type: 'play_start',
            ts: new Date(ts).toISOString(),
            session_id: `probe-${i}`,
            content_id: 'final',
            user_id: `u-${i}`,
          },
        ],
      };
      const r = await fetch(`http://127.0.0.1:${port}/v1/ingest/events`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const acked = performance.now();
      if (r.status !== 200) throw new Error(`ingest answered ${r.status}`);
      sent.push(ts);
      const second = Math.ceil(ts / 1000);
      // Sessions counting at that second: every probe so far whose 30 s includes it.
      const expected = sent.filter((s) => Math.ceil(s / 1000) <= second && second * 1000 <= s + 30_000).length;
      for (;;) {
        const res = await client.query({
          query:
            'SELECT sum(sessions) AS n FROM concurrency_seconds WHERE tenant = {t:String} AND ts = toDateTime({s:UInt32})',
          query_params: { t: 'fresh', s: second },
          format: 'JSONEachRow',
        });
        const [row] = await res.json<{ n: string }>();
        if (Number(row?.n ?? 0) >= expected) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      lags.push(performance.now() - acked);
      await new Promise((r) => setTimeout(r, 100));
    }
    lags.sort((a, b) => a - b);
    const pct = (p: number): number => lags[Math.min(lags.length - 1, Math.floor((p / 100) * lags.length))]!;
    console.log(
      `\n3. freshness: ingest acknowledged → counted in concurrency_seconds (AGGREGATE_FLUSH_INTERVAL_MS=${config.aggregate_flush_interval_ms}), ${probes} probes`,
    );
    console.log(
      `   p50 ${pct(50).toFixed(0)} ms, p99 ${pct(99).toFixed(0)} ms, max ${lags[lags.length - 1]!.toFixed(0)} ms`,
    );
    console.log(`   target: p99 < 2 s: ${pct(99) < 2000 ? 'met' : 'NOT met'}`);
  } finally {
    await started.stop();
    await removeNamespace(natsUrl, config.nats_prefix);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The flusher on many small output messages: in groups, and one message per group, on the same messages. */
async function flush(): Promise<void> {
  const count = Number(args['flush-messages']);
  const perMessage = Number(args['flush-events']);
  // Output as a shard seals it: one input message each (the event stream's message i + 1), and the rows the runtime
  // drained after it.
  const agg = new Aggregation(pipelines, 86_400_000);
  const inputs = encodedMessages(count, perMessage, 2000);
  const outputs = inputs.map((body, i) => {
    for (const e of decodeMessage(body).events) agg.apply(e);
    const rows = [...agg.drain(i).rows].map(([table, list]) => encodeRows(table, list));
    return frameOutput([frameInput(i + 1, [])], rows);
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-bench-flush-'));
  const store = await Store.open({ clickhouse_url: '', data_dir: dataDir, events_retention_days: 30 }, log);
  console.log(
    `\n4. flush: ${count} output messages of ${perMessage} events and their snapshot rows (${snapshotRows(outputs)} rows), raw stream (and the events from the event stream) → embedded ClickHouse`,
  );
  const rates: number[] = [];
  try {
    for (const [label, options] of [
      ['in groups (as it runs)', {}],
      ['one message per group', { maxGroupBytes: 1 }],
    ] as const) {
      // A namespace each: its raw stream's creation time makes its de-duplication tokens its own.
      const prefix = `bench${randomUUID().slice(0, 8)}`;
      const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log, 'bench-flush');
      try {
        await bus.ensureStreams(1, 1);
        for (const body of inputs) await bus.js.publish(bus.names.eventsSubject(0), body);
        let last = 0;
        for (const o of outputs) last = (await bus.js.publish(bus.names.rawSubject(0), o)).seq;
        const flusher = flushTiers(bus, store, log, undefined, options);
        const started = process.hrtime.bigint();
        await flusher.start();
        for (const consumer of [bus.names.flushConsumer, bus.names.flushBulkConsumer])
          while ((await bus.jsm.consumers.info(bus.names.rawStream, consumer)).ack_floor.stream_seq < last)
            await new Promise((r) => setTimeout(r, 10));
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        await flusher.stop();
        rates.push(count / seconds);
        console.log(
          `   ${label}: ${seconds.toFixed(2)} s = ${Math.round(count / seconds).toLocaleString()} messages/s, ${Math.round((count * perMessage) / seconds).toLocaleString()} events/s`,
        );
      } finally {
        await bus.close();
        await removeNamespace(natsUrl, prefix);
      }
    }
    console.log(`   in groups / one per group: ${(rates[0]! / rates[1]!).toFixed(1)}×`);
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function snapshotRows(outputs: readonly Buffer[]): number {
  return outputs.reduce(
    (n, o) => n + Object.values(decodeOutput(o).rows ?? {}).reduce((m, rows) => m + rows.length, 0),
    0,
  );
}

if (!skip.has('throughput')) await throughput();
if (!skip.has('memory')) memory();
if (!skip.has('freshness')) await freshness();
if (!skip.has('flush')) await flush();
setImmediate(() => process.exit(0));
