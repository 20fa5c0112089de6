import { contextAttr } from '../bus/event-reader.js';
import type { WireEvent } from '../bus/wire.js';
import type { Detector } from './detector.js';

// What a pipeline file (pipelines/*.ts) declares, and what the aggregator runtime (runtime.ts) gives it.

/**
 * The values a segment carries beside its state, each read from the events: a segment's value is that of the event it
 * starts at, or, when that event carried none, the last one before it; null before any. A metric of a value per
 * segment (watch time by rendition, by CDN) reads it from `Segment`; a new value is one line here, and the runtime and
 * the checkpoints carry it unchanged (src/aggregate/session.ts keeps them beside the timeline). It must be read from a
 * field the `events` table keeps and `toEvent` (src/store/events.ts) gives back, or recall and replay would lose it.
 */
export const segmentValues = [
  /** The rendition's bitrate. */
  { name: 'bitrate_kbps', kind: 'number', read: (e: WireEvent): number | undefined => e.bitrate_kbps },
  /** The CDN serving the segment: a multi-CDN player's switch moves the segments after it. */
  { name: 'cdn', kind: 'string', read: (e: WireEvent): string | undefined => contextAttr(e, 'cdn') || undefined },
] as const;

type SegmentValue<V> = V extends { kind: 'number' } ? number | null : string | null;

/** A span of a session's timeline in one state, and its values (`segmentValues`). */
export type Segment = { from: number; to: number | null; state: number } & {
  [V in (typeof segmentValues)[number] as V['name']]: SegmentValue<V>;
};

export type ColumnType =
  | 'String'
  | 'LowCardinality(String)'
  | 'DateTime'
  | 'Int64'
  | 'Float64'
  | 'UInt64'
  | 'UInt8'
  | 'UInt16'
  | 'UInt32'
  | 'UInt128'
  | 'Nullable(Float64)'
  | 'DateTime64(3)'
  | 'Array(UInt64)';

/**
 * A snapshot table a pipeline writes.
 * - `sum`: rows are signed deltas summed by key (SummingMergeTree). A late event retracts what it changed and adds
 *   the new contribution, so sums stay exact. `ts` (a DateTime bucket) must be a key column: replay cuts by it.
 * - `replace`: one row per key, the highest `version` wins (ReplacingMergeTree); queries read it with FINAL.
 * - `append`: one row per event (MergeTree); the events are de-duplicated before they get here.
 */
export interface TableSpec {
  name: string;
  engine: 'sum' | 'replace' | 'append';
  /** Key columns first, in ORDER BY order, then value columns. */
  key: ReadonlyArray<readonly [string, ColumnType]>;
  values: ReadonlyArray<readonly [string, ColumnType]>;
  /**
   * Columns ClickHouse computes from the others at insert (`MATERIALIZED`): never sent, read by queries. In a `sum`
   * table they must be functions of the key columns: they join the sort key, or merges would add them up.
   */
  derived?: ReadonlyArray<readonly [name: string, type: string, expression: string]>;
  /**
   * PARTITION BY of a `replace` table whose rows never move between partitions (unpartitioned otherwise). FINAL then
   * merges versions only in the partitions that still hold several parts: the recent ones.
   */
  partitionBy?: string;
  /**
   * Aggregate projections (name, `SELECT … GROUP BY …`): ClickHouse keeps them beside each part and answers a query
   * from one when its grouping and aggregates match, reading far fewer rows. An answer never depends on whether one
   * is used. Write conditions as ClickHouse normalises them (`notEmpty(x)`, not `x != ''`), or they never match.
   */
  projections?: ReadonlyArray<readonly [name: string, select: string]>;
  /**
   * A `sum` table whose last key column keys a map: rows with the same other key columns are one row, holding the
   * last key column and the values as the parallel arrays of `Nested(<key>, <values>)` named `map` (its name ends in
   * `Map`, so ClickHouse sums it by key and drops zero entries). The runtime hands on each contribution as a row of its
   * own, one map key each, and leaves the summing to ClickHouse.
   */
  map?: string;
  /**
   * Days of data a row holds from its `ts` on (a window): the rows outlive their `ts` by this beyond the retention,
   * and replay rewrites every `ts` whose span holds a replayed hour.
   */
  spanDays?: number;
  /**
   * An `INSERT … SELECT` recomputing the table from other snapshot tables, for rows whose own `ts` cannot bound what
   * they hold (replay rewrites whole `ts` values with it; a bulk load fills the table). Unscoped, every row;
   * scoped, a tenant's rows with `ts` in [from_s, to_s), from parameters `{tenant:String}`, `{from_s:UInt32}` and
   * `{to_s:UInt32}` (Unix seconds).
   */
  rebuild?: (scoped: boolean) => string;
  /**
   * A table ClickHouse derives from another rather than one the aggregators write: rows per (tenant, value of the
   * source's `by` column), recomputed from all the source's rows of those values. Every insert into the source
   * refreshes the values it wrote (store/snapshots.ts `insertSnapshotRows`), so a late row lands in place as it does
   * in the source. `refresh` is an `INSERT … SELECT` recomputing the rows of `{tenant:String}`'s `{keys:Array(String)}`,
   * a value without source rows left included; `fill` recomputes every row (a bulk load: bench/query-data.ts). The source is an `append`
   * or `sum` table (replay finds the keys it deletes by `ts`).
   */
  derivedFrom?: { table: string; by: string; refresh: string; fill: string };
  /**
   * Written by the flush role's live tier, with the events, every `FLUSH_INTERVAL_MS`, rather than with the other
   * tables every `FLUSH_BULK_INTERVAL_MS` (src/flush/flusher.ts `FlushTier`): for a table whose answers are read
   * within a second of the event (concurrency: `/v1/live`, the live page). Every table live would cost the store a
   * part per table and flush, at any load.
   */
  live?: true;
}

type ColumnName<T extends TableSpec> =
  | T['key'][number][0]
  | T['values'][number][0]
  | (T extends { derived: ReadonlyArray<readonly [infer N extends string, string, string]> } ? N : never);

/**
 * A table's column names, for its read side to build queries from (`c.watch_ms`): a renamed or removed column is then a
 * type error in every query, rather than SQL that fails at run time. The spec must be declared `as const satisfies
 * TableSpec`, so its names stay literal.
 */
export function columns<T extends TableSpec>(spec: T): { readonly [K in ColumnName<T>]: K } {
  return Object.fromEntries([...spec.key, ...spec.values, ...(spec.derived ?? [])].map(([name]) => [name, name])) as {
    readonly [K in ColumnName<T>]: K;
  };
}

/**
 * Hourly and daily sums of a `sum` table's values by `by` (projections `hours` and `days`), for long ranges: a query
 * reads whole days, then whole hours, from them and only the edge minutes from the rows (queries/range.ts `tiers`).
 */
export function timeRollups(by: readonly string[], values: readonly string[]): NonNullable<TableSpec['projections']> {
  return (['Hour', 'Day'] as const).map((unit) => {
    const keys = ['tenant', `toStartOf${unit}(ts)`, ...by].join(', ');
    return [
      `${unit.toLowerCase()}s`,
      `SELECT ${keys}, ${values.map((v) => `sum(${v})`).join(', ')} GROUP BY ${keys}`,
    ] as const;
  });
}

/** A session's attributes (docs/metrics.md): immutable, replaced as a whole when one changes. */
export interface SessionAttrs {
  readonly tenant: string;
  readonly session_id: string;
  readonly content_id: string;
  readonly region: string;
  readonly country: string;
  readonly pop: string;
  readonly device: string;
  /** `context.app_version` and `context.player` (detection's cohorts); '' when no event said. */
  readonly app_version: string;
  readonly player: string;
  readonly viewer: string;
  /** ts of the first play_start, or null. */
  readonly started_at: number | null;
  /** Startup time and the ts of the first_frame it ends at, or null. */
  readonly startup_ms: number | null;
  readonly startup_at: number | null;
  /** ts of the first fatal error, or null. */
  readonly fatal_at: number | null;
  /** ts of the first event that closed the session (fatal error, ended, session_end), or null. */
  readonly closed_at: number | null;
  readonly ended: boolean;
  readonly furthest_sec: number;
  readonly duration_sec: number | null;
  /** Unix ms of the minute of the session's first event, and of the hour of its last, or null before any event. */
  readonly first_minute: number | null;
  readonly last_hour: number | null;
}

/** A session as the snapshot hook sees it. */
export interface SessionView {
  attrs: SessionAttrs;
  first_ts: number;
  last_ts: number;
  events: number;
}

/** A value of a row; arrays fill the columns of a `map` table's Nested map. */
export type Cell = string | number | null | readonly number[];

/** Named counters of a detector signal (docs/alerts.md): summed per key and bucket, across output and shards. */
export type Fields = Record<string, number>;

/**
 * One row of detector input: counters for a key (its first part is the tenant) and an event-time bucket (`at`, Unix
 * seconds of its start: a minute's, or of the shorter bucket its detector reads). Signals are deltas like `sum` rows:
 * a late event retracts and re-adds what it changes.
 */
export interface SignalRow {
  name: string;
  key: readonly string[];
  at: number;
  fields: Fields;
}

/** Per-session marks, for counting a session once per minute and kind (distinct sessions, summable over shards). */
export interface Marks {
  /** True the first time this session reaches (`kind`, `minute`); a session lives in one shard only. */
  first(kind: string, minute: number): boolean;
}

/**
 * Where pipelines put their output; the runtime holds it until the next flush, merging `sum` rows (but a `map`
 * table's) and signals per key. `add` and `signal` copy what they keep, so a hook called for every event may fill the
 * same key, values and fields arrays each time rather than make new ones: at hundreds of thousands of events a
 * second, those were most of the garbage a shard made.
 */
export interface Emitter {
  /** Add signed deltas to a `sum` table row. `key` holds the key columns in order (ts as Unix seconds). */
  add(table: TableSpec, key: readonly Cell[], values: readonly number[]): void;
  /** Add `sign` to the single value column of a `sum` table keyed (tenant, ts) for each second in [fromSec, toSec). */
  addSeconds(table: TableSpec, tenant: string, fromSec: number, toSec: number, sign: number): void;
  /**
   * Set the row of a `replace` table: `version` is filled in (the flush's, or `Accumulator.putVersion`), and the last
   * row put for a key wins: ClickHouse keeps a key's row of the highest version, and the later of equal ones. It
   * keeps `row`.
   */
  put(table: TableSpec, row: readonly Cell[]): void;
  /** Append a row to an `append` table. */
  append(table: TableSpec, row: readonly Cell[]): void;
  /** Add to a detector signal (read by the alerts role, never stored in ClickHouse). */
  signal(name: string, key: readonly string[], at: number, fields: Fields): void;
}

export interface Pipeline {
  name: string;
  tables: readonly TableSpec[];
  /** A session segment's contribution, times `sign` (+1 added, -1 retracted). `seg` is only valid during the call. */
  segment?: (attrs: SessionAttrs, seg: Segment, sign: 1 | -1, out: Emitter) => void;
  /** A session's own contribution (from its attributes), times `sign`; called when the attributes change. */
  session?: (attrs: SessionAttrs, sign: 1 | -1, out: Emitter) => void;
  /**
   * Every attribute `session` reads, when a pipeline names them: a change to none of them skips its retract and
   * re-add, which would cancel out (most events only move `furthest_sec`). test/pipelines/session-reads.test.ts checks
   * that `session` depends on nothing else.
   */
  sessionReads?: readonly (keyof SessionAttrs)[];
  /**
   * The net of `session(before, -1)` and `session(after, +1)`, emitted directly, for a pipeline whose output mostly
   * stays put when the attributes change (viewers: a session's new last hour adds one hour to its row). When
   * present, the runtime calls it instead; test/pipelines/session-change.test.ts checks it against `session`.
   */
  sessionChange?(before: SessionAttrs, after: SessionAttrs, out: Emitter): void;
  /**
   * Called at a flush for each session that changed since its last snapshot: at the next flush for a new session and
   * for a change to an attribute in `snapshotNow`; any other change (the span's end, the event count, other
   * attributes) may wait up to `session_snapshot_interval_ms` of arrival time, or until the shard is idle.
   */
  snapshot?: (session: SessionView, out: Emitter) => void;
  /** The attributes whose change `snapshot` writes at the next flush; when absent, every change is. */
  snapshotNow?: readonly (keyof SessionAttrs)[];
  /** Any event (session or not), once, after de-duplication: for additive per-event metrics. */
  event?: (e: WireEvent, out: Emitter) => void;
  /** A session event, once, after de-duplication, with the session's attributes after it: for detector signals. */
  activity?: (attrs: SessionAttrs, e: WireEvent, marks: Marks, out: Emitter) => void;
  /** Alert conditions over the signals this pipeline emits, run by the alerts role (docs/alerts.md). */
  detectors?: readonly Detector[];
}

export const minuteOf = (ms: number): number => Math.floor(ms / 60_000) * 60;
export const secondOf = (ms: number): number => Math.floor(ms / 1000);
