import { Unpackr } from 'msgpackr';
import t from 'tap';
import { pipelines } from '../../pipelines/index.js';
import type { WireEvent } from '../../src/bus/wire.js';
import type { Rows } from '../../src/aggregate/accumulator.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import { minuteOf, type Cell, type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';
import { watchMs } from '../../pipelines/watch-time/pipeline.js';
import { eventAt, net, tables } from '../helpers/pipeline.js';

// The runtime's promise: whatever order a session's events arrive in, and however the output is cut into flushes,
// the summed snapshot rows are the same as for the events in time order. That is what makes late events exact.

/**
 * Watch time per CDN and rendition, declared here alone: a metric of values per segment needs no change to the
 * runtime (src/metric/pipeline.ts `segmentValues`). Run beside the real pipelines in every test of this file.
 */
const watchByCdn = {
  name: 'test_watch_by_cdn',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
    ['cdn', 'LowCardinality(String)'],
    ['kbps', 'UInt32'],
  ],
  values: [['watch_ms', 'Int64']],
} as const satisfies TableSpec;
const byCdn: Pipeline = {
  name: 'watch-by-cdn',
  tables: [watchByCdn],
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms !== 0)
      out.add(watchByCdn, [attrs.tenant, minuteOf(seg.to!), seg.cdn ?? '?', seg.bitrate_kbps ?? 0], [sign * ms]);
  },
};
const all = [...pipelines, byCdn];
const allTables = new Map([...tables, [watchByCdn.name, watchByCdn]]);

function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const types = [
  'heartbeat',
  'heartbeat',
  'heartbeat',
  'pause',
  'resume',
  'seek_start',
  'seek_end',
  'rebuffer_start',
  'rebuffer_end',
  'bitrate_change',
  'error',
  'first_frame',
];

/**
 * A few sessions of random events, some at equal timestamps, with attributes and bitrates that differ between events.
 */
function sessionEvents(seed: number): WireEvent[] {
  const r = rng(seed);
  const base = Date.UTC(2026, 10, 20, 10);
  const out: WireEvent[] = [];
  for (let s = 0; s < 4; s++) {
    let ts = base + Math.floor(r() * 600_000);
    const n = 5 + Math.floor(r() * 30);
    for (let i = 0; i < n; i++) {
      const type =
        i === 0
          ? 'play_start'
          : i === n - 1 && r() < 0.5
            ? r() < 0.5
              ? 'ended'
              : 'session_end'
            : types[Math.floor(r() * types.length)]!;
      out.push(
        eventAt(type, ts, {
          region: r() < 0.2 ? '' : ['Goa', 'Kerala'][Math.floor(r() * 2)]!,
          device: ['tv', 'mobile'][Math.floor(r() * 2)]!,
          session_id: `s${s}`,
          content_id: 'c1',
          ...(r() < 0.3 ? { user_id: `u${s}` } : { anonymous_id: `a${s}` }),
          ...(type === 'error' ? { properties: { fatal: r() < 0.3 } } : {}),
          ...(type === 'play_start' ? { properties: { duration_sec: 1200 } } : {}),
          ...(r() < 0.5 ? { position_sec: Math.floor(r() * 1300) } : {}),
          // A rendition's bitrate on its changes and on some other events, ties of different values included.
          ...(type === 'bitrate_change' || r() < 0.1
            ? { bitrate_kbps: [400, 800, 1600, 16_000][Math.floor(r() * 4)]! }
            : {}),
          // A multi-CDN player's switches, on some events, ties of different CDNs included.
          context: {
            pop: ['bom1', 'maa1'][Math.floor(r() * 2)]!,
            ...(r() < 0.15 ? { cdn: ['akamai', 'fastly', 'cloudfront'][Math.floor(r() * 3)]! } : {}),
          },
        }),
      );
      // Gaps from 0 (a tie) to over the 30 s cap.
      ts += [0, 1, 999, 1000, 10_000, 29_999, 30_000, 30_001, 45_000][Math.floor(r() * 9)]!;
    }
  }
  return out;
}

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

/** A shard's idle flush (`drainLingering`) as arrays of cells, as `drain` gives them. */
function lingering(agg: Aggregation, version: number): Rows {
  const out = agg.drainLingering(version);
  if (!out) return new Map();
  return new Map(
    out.rows.tables.map(({ name, first, count }) => [
      name,
      unpackr.unpackMultiple(out.rows.slice(first, count)) as Cell[][],
    ]),
  );
}

/** The net rows of `events` drained every `flushEvery`, then (progress waiting `snapshotEveryMs`) as a shard idle. */
function run(events: readonly WireEvent[], flushEvery: number, snapshotEveryMs = 0): Record<string, unknown> {
  const agg = new Aggregation(all, 86_400_000, snapshotEveryMs);
  const flushes: Rows[] = [];
  events.forEach((e, i) => {
    agg.apply(e);
    if ((i + 1) % flushEvery === 0) flushes.push(agg.drain(i).rows);
  });
  flushes.push(agg.drain(events.length).rows, lingering(agg, events.length));
  return net(flushes, allTables);
}

t.test('any arrival order and any flush cadence give the rows of time order', async (t) => {
  for (let seed = 1; seed <= 40; seed++) {
    const events = sessionEvents(seed);
    const inOrder = run(
      [...events].sort((a, b) => a.ts - b.ts),
      1_000_000,
    );
    const r = rng(seed * 7919);
    const shuffled = [...events].sort(() => r() - 0.5);
    t.same(run(shuffled, 1 + (seed % 7)), inOrder, `seed ${seed}: ${events.length} events shuffled`);
    t.same(run([...events].reverse(), 3), inOrder, `seed ${seed}: reversed`);
    t.same(run(shuffled, 1 + (seed % 5), 60_000), inOrder, `seed ${seed}: shuffled, progress snapshotted later`);
  }
});

t.test('a segment plays from the CDN its first event names, else the last one named before it', async (t) => {
  const at = Date.UTC(2026, 10, 20, 10);
  const e = (type: string, s: number, cdn?: string): WireEvent =>
    eventAt(type, at + s * 1000, { session_id: 's1', context: cdn === undefined ? {} : { cdn } });
  const onTime = [
    e('play_start', 0, 'akamai'),
    e('first_frame', 2),
    e('heartbeat', 10),
    e('heartbeat', 20, 'cloudfront'),
    e('heartbeat', 30),
    // Two of one time and type naming different CDNs: ordered by CDN, whatever the arrival.
    e('heartbeat', 40, 'b'),
    e('heartbeat', 40, 'a'),
    e('heartbeat', 50),
  ];
  // A late switch to fastly at 15 s moves 15–20 s, which inherited akamai, and nothing after cloudfront's own.
  const late = e('heartbeat', 15, 'fastly');
  const byCdnMs = (events: readonly WireEvent[]): Record<string, number> => {
    const rows = run(events, 2).test_watch_by_cdn as [string, number[]][];
    return Object.fromEntries(rows.map(([key, [ms]]) => [(JSON.parse(key) as string[])[2]!, ms!]));
  };
  const want = { akamai: 13_000, fastly: 5_000, cloudfront: 20_000, b: 10_000 };
  t.same(byCdnMs([...onTime, late]), want, 'the late switch arriving last');
  t.same(byCdnMs([late, ...onTime].reverse()), want, 'every event in reverse');
});

t.test('a checkpoint taken between flushes resumes to the same rows', async (t) => {
  const events = sessionEvents(99);
  const whole = run(events, 5);
  for (const every of [0, 60_000]) {
    const a = new Aggregation(all, 86_400_000, every);
    const flushes: Rows[] = [];
    const half = Math.floor(events.length / 2);
    for (const e of events.slice(0, half)) a.apply(e);
    flushes.push(a.drain(1).rows);
    const saved = structuredClone(a.save());
    const b = new Aggregation(all, 86_400_000, every);
    b.load(saved);
    for (const e of events.slice(half)) b.apply(e);
    flushes.push(b.drain(2).rows, lingering(b, 2));
    t.same(net(flushes, allTables), whole, `progress snapshotted within ${every} ms`);
  }
});

t.test(
  "a session's progress is snapshotted once a minute, its start and end at once, all of it when idle",
  async (t) => {
    const at = Date.UTC(2026, 10, 20, 10, 5);
    const a = new Aggregation(pipelines, 86_400_000, 60_000);
    const hb = (s: number): WireEvent => eventAt('heartbeat', at + s * 1000, { position_sec: s });
    /** The session_hours rows of one drain (a seal every event): [last_ts, events] of each. */
    const rows = (): Array<[number, number]> =>
      (a.drain(0).rows.get('session_hours') ?? []).map((r) => [r[4] as number, r[11] as number]);
    a.apply(eventAt('play_start', at, { anonymous_id: 'v1' }));
    t.same(rows(), [[at, 1]], 'a new session at the next drain');
    let written = 0;
    for (let s = 10; s <= 600; s += 10) {
      a.apply(hb(s));
      written += rows().length;
    }
    // Fell behind at 10 s, due at 70, 140, ...: a row each 70 s of the 60 heartbeats.
    t.ok(written >= 8 && written <= 10, `${written} rows for 60 heartbeats`);
    t.same(
      [...lingering(a, 1).get('session_hours')!].map((r) => [r[4], r[11]]),
      [[at + 600_000, 61]],
      'idle: the latest progress',
    );
    t.same(lingering(a, 2).size, 0, 'and only once');
    a.apply(eventAt('ended', at + 605_000));
    t.same(rows(), [[at + 605_000, 62]], 'an end at the next drain');
    const b = new Aggregation(pipelines, 86_400_000, 60_000);
    b.apply(eventAt('play_start', at, { anonymous_id: 'v1' }));
    b.drain(0);
    b.apply(hb(10));
    b.drain(0);
    const c = new Aggregation(pipelines, 86_400_000, 60_000);
    c.load(structuredClone(b.save()));
    t.same(
      [...lingering(c, 1).get('session_hours')!].map((r) => [r[4], r[11]]),
      [[at + 10_000, 2]],
      'owed progress survives a checkpoint',
    );
  },
);

t.test("a session's app_version and player are the first in event order, and an earlier event's win", async (t) => {
  const at = Date.UTC(2026, 10, 20, 10);
  const e = (ts: number, context: Record<string, string>): WireEvent =>
    eventAt('heartbeat', ts, { session_id: 's1', region: 'Goa', context });
  const a = new Aggregation(pipelines, 86_400_000);
  a.apply(e(at + 20_000, { pop: 'bom1', app_version: '2.0', player: 'shaka' }));
  a.apply(e(at + 30_000, { pop: 'bom1', app_version: '3.0', player: 'hls.js' }));
  a.apply(e(at + 10_000, { pop: 'bom1', app_version: '1.0' }));
  t.match(a.save().sessions[0]![1], { app_version: '1.0', player: 'shaka' }, 'each from the earliest event that says');
  const b = new Aggregation(pipelines, 86_400_000);
  b.load(a.save());
  b.apply(e(at + 5_000, { pop: 'bom1', app_version: '0.9', player: 'exo' }));
  t.match(b.save().sessions[0]![1], { app_version: '0.9', player: 'exo' }, 'after a checkpoint, as before it');
});

t.test(
  'a batch regenerated from a checkpoint equals the one first drained, rows and signals in the same order',
  async (t) => {
    // What a shard does after a crash mid-publish: load the checkpoint of an earlier flush, apply the input since without
    // output, then the batch's input with output. The batch must come out as it did the first time, in the same order
    // (it is cut into parts by size, and only the parts that are missing are published), although the first run's
    // accumulator held rows of earlier flushes that the rebuilt one never saw.
    for (let seed = 1; seed <= 20; seed++) {
      const r = rng(seed * 31);
      const events = [...sessionEvents(seed)].sort(() => r() - 0.5);
      const cuts = [Math.floor(events.length / 4), Math.floor(events.length / 2), Math.floor((3 * events.length) / 4)];
      const every = seed % 2 === 0 ? 60_000 : 0;
      const first = new Aggregation(all, 86_400_000, every);
      let checkpoint: ReturnType<Aggregation['save']> | undefined;
      let batch: unknown;
      events.forEach((e, i) => {
        first.apply(e);
        if (i + 1 === cuts[0]) {
          first.drain(1);
          checkpoint = structuredClone(first.save());
        }
        if (i + 1 === cuts[1]) first.drain(2);
        if (i + 1 === cuts[2]) batch = first.drain(3);
      });
      const again = new Aggregation(all, 86_400_000, every);
      again.load(checkpoint!);
      for (const e of events.slice(cuts[0], cuts[1])) again.apply(e);
      again.discard();
      for (const e of events.slice(cuts[1], cuts[2])) again.apply(e);
      const regenerated = again.drain(3);
      t.equal(JSON.stringify(regenerated), JSON.stringify(batch), `seed ${seed}: the same batch, byte for byte`);
    }
  },
);

t.test('the rows a shard publishes (MessagePack) are those of the arrays, table by table and in order', async (t) => {
  for (let seed = 1; seed <= 20; seed++) {
    const events = sessionEvents(seed);
    const arrays = new Aggregation(pipelines, 86_400_000);
    const encoded = new Aggregation(pipelines, 86_400_000);
    let differ = 0;
    events.forEach((e, i) => {
      arrays.apply(e);
      encoded.apply(e);
      if (i % 5 !== 4 && i !== events.length - 1) return;
      const a = arrays.drain(i);
      const b = encoded.drainEncoded(i);
      const decoded = new Map(
        b.rows.tables.map(({ name, first, count }) => [name, unpackr.unpackMultiple(b.rows.slice(first, count))]),
      );
      if (
        JSON.stringify([...decoded]) !== JSON.stringify([...a.rows]) ||
        JSON.stringify(b.signals) !== JSON.stringify(a.signals)
      )
        differ++;
      if (b.rows.count !== [...a.rows.values()].reduce((n, rows) => n + rows.length, 0)) differ++;
    });
    t.equal(differ, 0, `seed ${seed}: every flush the same`);
  }
});

/**
 * Keys of `replace` tables put more than once in a flush, and those of them put twice at one version: their rows may
 * reach the store in separate messages, written in either order, so only a higher version can make the later win.
 */
function putAgain(flush: Rows): { again: number; tied: number } {
  let again = 0;
  let tied = 0;
  for (const [name, rows] of flush) {
    const spec = allTables.get(name)!;
    if (spec.engine !== 'replace') continue;
    const keyLength = spec.key.length;
    const seen = new Map<string, Set<number>>();
    for (const row of rows) {
      const key = JSON.stringify(row.slice(0, keyLength));
      const versions = seen.get(key) ?? new Set();
      const version = Number(row[row.length - 1]);
      if (versions.size > 0) again++;
      if (versions.has(version)) tied++;
      seen.set(key, versions.add(version));
    }
  }
  return { again, tied };
}

/**
 * The arrivals through a runtime that keeps sessions `retainMs` and recalls those `lateUnknownSessions` names from the
 * events it was given before (what the store would answer): the summed rows, the sessions recalled, how many sessions
 * memory held after each arrival, and the keys put again in a flush (`putAgain`).
 */
function runRecalling(
  arrivals: readonly WireEvent[],
  retainMs: number,
): { rows: Record<string, unknown>; recalled: number; held: number[]; again: number; tied: number } {
  const agg = new Aggregation(all, retainMs);
  const stored = new Map<string, WireEvent[]>();
  const flushes: Rows[] = [];
  const held: number[] = [];
  let recalled = 0;
  arrivals.forEach((e, i) => {
    for (const [, ids] of agg.lateUnknownSessions([e]) ?? []) {
      for (const id of ids) {
        recalled++;
        agg.restore(stored.get(id) ?? []);
      }
    }
    agg.apply(e);
    // Versions as a shard's: the input's sequence (from 1), a flush's that of its last input.
    agg.evictIdle(i + 1);
    held.push(agg.sessionCount);
    if (e.session_id !== undefined) stored.set(e.session_id, [...(stored.get(e.session_id) ?? []), e]);
    if ((i + 1) % 4 === 0) flushes.push(agg.drain(i + 1).rows);
  });
  flushes.push(agg.drain(arrivals.length).rows);
  const puts = flushes.map(putAgain);
  return {
    rows: net(flushes, allTables),
    recalled,
    held,
    again: puts.reduce((n, p) => n + p.again, 0),
    tied: puts.reduce((n, p) => n + p.tied, 0),
  };
}

const hour = 3_600_000;

t.test(
  'a session that left memory, restored from its stored events, takes late events as if it had stayed',
  async (t) => {
    let putTwice = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const r = rng(seed * 104_729);
      const events = [...sessionEvents(seed)].sort(() => r() - 0.5);
      const half = Math.floor(events.length / 2);
      const base = Math.min(...events.map((e) => e.ts));
      // The first half comes on time; an event without a session three hours later moves the clock past every session's
      // retention; the rest comes late.
      const arrivals = [
        ...events.slice(0, half).map((e) => ({ ...e, received_at: e.ts })),
        eventAt('app_open', base + 3 * hour, { session_id: undefined }),
        ...events.slice(half).map((e, i) => ({ ...e, received_at: base + 3 * hour + i })),
      ];
      // Retained an hour: longer than the on-time half takes, shorter than the three hours to the late half.
      const { rows, recalled, held, again, tied } = runRecalling(arrivals, hour);
      t.equal(held[half], 0, `seed ${seed}: every session left memory`);
      t.ok(recalled > 0, `seed ${seed}: ${recalled} sessions recalled`);
      t.same(rows, run(arrivals, 4), `seed ${seed}: the rows of a run that kept every session`);
      putTwice += again;
      t.equal(tied, 0, `seed ${seed}: no key put twice in a flush at one version`);
    }
    t.ok(putTwice > 0, `${putTwice} keys put again in the flush that evicted them (evicted, then recalled)`);
  },
);

t.test('a session that left memory and continues with recent events takes up where it stopped', async (t) => {
  for (let seed = 1; seed <= 20; seed++) {
    const events = [...sessionEvents(seed)].sort((a, b) => a.ts - b.ts);
    const half = Math.floor(events.length / 2);
    const base = events[0]!.ts;
    // Every session pauses for days after the first half, then plays on: on time, but without the attributes its
    // first events carried (a heartbeat names only its session), and past any retention of memory.
    const pause = (2 + (seed % 5)) * 24 * hour;
    const arrivals = [
      ...events.slice(0, half).map((e) => ({ ...e, received_at: e.ts })),
      eventAt('app_open', base + pause - hour, { session_id: undefined }),
      ...events.slice(half).map(({ content_id: _c, user_id: _u, anonymous_id: _a, ...e }) => ({
        ...e,
        region: '',
        device: '',
        ts: e.ts + pause,
        received_at: e.ts + pause,
      })),
    ];
    const { rows, recalled, held } = runRecalling(arrivals, hour);
    t.equal(held[half], 0, `seed ${seed}: every session left memory`);
    t.ok(recalled > 0, `seed ${seed}: ${recalled} sessions recalled`);
    t.same(rows, run(arrivals, 4), `seed ${seed}: the rows of a run that kept every session`);
  }
});
