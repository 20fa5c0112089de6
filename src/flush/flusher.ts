import { AckPolicy, DeliverPolicy, type JsMsg } from 'nats';
import { Counter, Histogram } from 'prom-client';
import { snapshotTables } from '../../pipelines/index.js';
import type { Cell, TableSpec } from '../metric/pipeline.js';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import { streamIdentity, type Bus } from '../bus/bus.js';
import { readInputBytes } from '../bus/passed-events.js';
import { encodeFlushed, flushedInputs } from '../bus/progress.js';
import { decodeOutput } from '../bus/wire.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import { EventLines } from '../store/event-lines.js';
import { insertEvents } from '../store/events.js';
import { insertSnapshotRows } from '../store/snapshots.js';
import type { Store } from '../store/store.js';
import { FlushGroups, groupScope, groupSpan, groupToken, spanOf } from './groups.js';

const flushed = new Counter({
  name: 'darshak_flush_rows_total',
  help: 'Rows written to ClickHouse, by table',
  labelNames: ['table'] as const,
  registers: [registry],
});
const flushLatency = new Histogram({
  name: 'darshak_flush_insert_seconds',
  help: "Time to write one group of aggregator output messages to ClickHouse (all the tier's tables)",
  labelNames: ['tier'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});
const groupSize = new Histogram({
  name: 'darshak_flush_group_messages',
  help: 'Aggregator output messages written together, in one insert per table of the tier',
  labelNames: ['tier'] as const,
  buckets: [1, 2, 5, 10, 20, 50, 100],
  registers: [registry],
});

/**
 * Which writes of the raw stream a flusher makes; the flush role runs one of each, on consumers of their own.
 * - `live`: the events the messages pass on, into `events`, and the tables marked `live` (what is read within a
 *   second: concurrency), every `FLUSH_INTERVAL_MS`. It tells ingest what the store holds.
 * - `bulk`: every other pipeline table, every `FLUSH_BULK_INTERVAL_MS`: per-minute sums and session rows, read over
 *   minutes, whose inserts were most of the store's parts (each insert is a part per table, and a part costs the
 *   embedded store milliseconds of CPU whatever its size).
 */
export type FlushTier = 'live' | 'bulk';

/** The pipeline tables a tier writes. */
export const tierTables = (tier: FlushTier): TableSpec[] =>
  snapshotTables.filter((t) => (t.live === true) === (tier === 'live'));

/** How long a delivered message may go unacknowledged (and without a heartbeat) before JetStream sends it again. */
const ackWaitMs = 15_000;

export interface FlusherOptions {
  tier: FlushTier;
  /** Groups being written at once, at most; meanwhile arriving messages gather into the next. Default 2. */
  maxInflight: number;
  /** Message bytes one group holds, at most (a group also stays within one span of `groupSpan` sequences). Default 16 MiB. */
  maxGroupBytes: number;
  /**
   * A group starts at most this often, unless a full one is waiting: every insert makes a part per table that the
   * store merges in the background, and small frequent inserts kept the embedded store's merges busy at most of
   * a core. Default 0 (at once); the flush role takes `FLUSH_INTERVAL_MS` (live) and `FLUSH_BULK_INTERVAL_MS` (bulk).
   */
  minIntervalMs: number;
}

export const flusherDefaults: Omit<FlusherOptions, 'tier'> = {
  maxInflight: 2,
  maxGroupBytes: 16 * 1024 * 1024,
  minIntervalMs: 0,
};

/**
 * Writes its tier (`FlushTier`) of the raw stream to ClickHouse: the events it passes on to `events` (read from the
 * event stream by sequence) and the snapshot rows to the pipelines' tables.
 *
 * - Messages are written in groups, one insert per table per group: while groups are being written, arriving messages
 *   gather into the next, so a busy store gets fewer, larger inserts, and an idle one writes a message at once.
 * - Each insert's de-duplication token names the table, the stream (its identity, `streamIdentity`: a stream made
 *   again, whose sequences restart at 1, must not have its writes taken for the old one's) and the group. Groups are
 *   recorded in NATS before they are written (flush/groups.ts), so a message sent again is written again with its
 *   group, under the same tokens, and nothing is stored twice. A redelivered message not in any group is written alone, as
 *   a group of one.
 * - A message is acknowledged only once every insert of its group has returned.
 */
export class Flusher {
  private loop: ConsumeLoop | undefined;
  private readonly log: Logger;
  /** The tier's tables by name; the other tier's, as null (their rows are skipped here). */
  private readonly tables: ReadonlyMap<string, TableSpec | null>;
  private readonly options: FlusherOptions;
  /** Delivered and not yet acknowledged: kept alive by the heartbeat. */
  private readonly held = new Set<JsMsg>();
  private pending: JsMsg[] = [];
  private readonly inflight = new Set<Promise<void>>();
  /** Recorded groups being written again here, by first sequence: several of their messages may come back. */
  private readonly rewriting = new Map<number, Promise<void>>();
  private failure: Error | undefined;
  private streamId = '';
  private groups: FlushGroups | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastGroupAt = 0;
  private later: NodeJS.Timeout | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly store: Store,
    log: Logger,
    options: Partial<FlusherOptions> & Pick<FlusherOptions, 'tier'>,
  ) {
    this.log = log.child({ module: 'flush', tier: options.tier });
    this.options = { ...flusherDefaults, ...options };
    const mine = new Set(tierTables(options.tier));
    this.tables = new Map(snapshotTables.map((t) => [t.name, mine.has(t) ? t : null]));
    if (!(this.options.maxInflight >= 1) || !(this.options.maxGroupBytes >= 1) || !(this.options.minIntervalMs >= 0))
      throw new Error(
        `flusher: maxInflight and maxGroupBytes must be at least 1 and minIntervalMs at least 0, not ${JSON.stringify(options)}`,
      );
  }

  private get writesEvents(): boolean {
    return this.options.tier === 'live';
  }

  private get consumerName(): string {
    return this.options.tier === 'live' ? this.bus.names.flushConsumer : this.bus.names.flushBulkConsumer;
  }

  async start(): Promise<void> {
    await this.bus.ensureConsumer(this.bus.names.rawStream, {
      durable_name: this.consumerName,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: ackWaitMs * 1_000_000,
      max_ack_pending: 1000,
    });
    const consumer = await this.bus.js.consumers.get(this.bus.names.rawStream, this.consumerName);
    const stream = await this.bus.jsm.streams.info(this.bus.names.rawStream);
    this.streamId = streamIdentity(stream.config);
    // A record is needed while its messages can come back, which is at most as long as the stream keeps them.
    this.groups = new FlushGroups(
      await this.bus.kv(this.bus.names.flushGroupsBucket, stream.config.max_age / 1_000_000 || undefined),
      groupScope(this.options.tier, this.streamId),
    );
    // A long insert says it is still at work, so the ack wait can be short: after a flusher is killed, its
    // unacknowledged messages go to another within the ack wait, not a minute later.
    this.heartbeat = setInterval(() => this.held.forEach((m) => m.working()), ackWaitMs / 3);
    this.loop = consumeLoop({
      bus: this.bus,
      open: async () => {
        this.failure = undefined;
        return consumer;
      },
      readAhead: { bytes: this.bus.readAheadBytes },
      handle: (m) => this.handle(m),
      log: this.log,
      onFailure: 'flush failed; its unacknowledged messages will come again',
    });
  }

  private async handle(m: JsMsg): Promise<void> {
    if (this.failure) throw this.failure;
    this.held.add(m);
    this.pending.push(m);
    this.kick();
    // Read no further ahead than a group's worth while every writer is busy.
    while (this.pending.length >= groupSpan && this.inflight.size > 0 && !this.failure)
      await Promise.race(this.inflight);
  }

  /** Start writing what is pending, as far as writers are free. */
  private kick(): void {
    while (this.pending.length > 0 && this.inflight.size < this.options.maxInflight && !this.failure) {
      const wait = this.lastGroupAt + this.options.minIntervalMs - Date.now();
      if (wait > 0 && !this.fullGroupWaiting()) {
        this.later ??= setTimeout(() => {
          this.later = undefined;
          this.kick();
        }, wait);
        return;
      }
      this.lastGroupAt = Date.now();
      const group = this.takeGroup();
      const p = this.writeGroup(group)
        .catch((err: Error) => {
          // Not acknowledged: JetStream sends them again after the ack wait, and they are written with this group.
          this.failure ??= err;
          for (const m of [...group, ...this.pending]) this.held.delete(m);
          this.pending = [];
        })
        .finally(() => {
          this.inflight.delete(p);
          this.kick();
        });
      this.inflight.add(p);
    }
  }

  /** Whether the pending messages fill a group: a span's worth, or the byte cap. */
  private fullGroupWaiting(): boolean {
    if (this.pending.length >= groupSpan) return true;
    let bytes = 0;
    for (const m of this.pending) bytes += m.data.length;
    return bytes >= this.options.maxGroupBytes;
  }

  /** The pending messages of the first one's span, up to the byte cap (at least one). */
  private takeGroup(): JsMsg[] {
    const span = spanOf(this.pending[0]!.seq);
    const group: JsMsg[] = [];
    let bytes = 0;
    this.pending = this.pending.filter((m) => {
      if (spanOf(m.seq) !== span || (group.length > 0 && bytes + m.data.length > this.options.maxGroupBytes))
        return true;
      group.push(m);
      bytes += m.data.length;
      return false;
    });
    return group;
  }

  private async writeGroup(messages: JsMsg[]): Promise<void> {
    const started = process.hrtime.bigint();
    const data = new Map(messages.map((m) => [m.seq, m.data]));
    // A message may be here twice (delivered again while held): once in the claim, every delivery acknowledged.
    const claim = await this.groups!.claim(
      messages.filter((m) => !m.redelivered).map((m) => m.seq),
      messages.filter((m) => m.redelivered).map((m) => m.seq),
    );
    await Promise.all([
      ...claim.created.map((g) => this.insert(g, data)),
      ...claim.recorded.map((g) => this.rewrite(g, data)),
    ]);
    for (const m of messages) {
      m.ack();
      this.held.delete(m);
    }
    // Told after the events are written, for ingest's load shedding; a lost message is made up for by the next.
    if (this.writesEvents && this.bus.connected)
      this.bus.nc.publish(this.bus.names.flushedSubject, encodeFlushed(flushedInputs(messages)));
    flushLatency.observe({ tier: this.options.tier }, Number(process.hrtime.bigint() - started) / 1e9);
    groupSize.observe({ tier: this.options.tier }, messages.length);
  }

  /** A group recorded earlier (here, or by a flusher that died): written again whole, what is not at hand read back from the stream. */
  private rewrite(group: number[], data: ReadonlyMap<number, Uint8Array>): Promise<void> {
    const first = group[0]!;
    let p = this.rewriting.get(first);
    if (!p) {
      p = (async () => {
        const all = new Map(data);
        for (const seq of group.filter((s) => !all.has(s))) {
          const stored = await this.bus.readMessage(this.bus.names.rawStream, seq);
          if (stored) all.set(seq, stored);
          else
            this.log.warn(
              { seq, group: first },
              'a message of a group written again is no longer in the stream; written without it',
            );
        }
        await this.insert(group, all);
      })().finally(() => this.rewriting.delete(first));
      this.rewriting.set(first, p);
    }
    return p;
  }

  /**
   * One insert per table of the tier of the group's messages, in sequence order; their events (live) read from the
   * event stream.
   */
  private async insert(group: readonly number[], data: ReadonlyMap<number, Uint8Array>): Promise<void> {
    const events = new EventLines();
    const rows = new Map<TableSpec, Cell[][]>();
    const outputs = group.flatMap((seq) => {
      const bytes = data.get(seq);
      return bytes ? [[seq, decodeOutput(bytes)] as const] : [];
    });
    if (this.writesEvents) {
      const input = await readInputBytes(
        this.bus,
        outputs.map(([, out]) => out),
        (seq) =>
          this.log.error(
            { ingest_seq: seq, group: group[0] },
            'an input message aggregator output names is no longer in the event stream; its events are not stored',
          ),
      );
      for (const [, out] of outputs)
        for (const [seq, dropped] of out.inputs) {
          const message = input.get(seq);
          if (message) events.add(message, seq, dropped);
        }
    }
    for (const [seq, out] of outputs) {
      for (const [name, tableRows] of Object.entries(out.rows ?? {})) {
        const table = this.tables.get(name);
        if (table === undefined) throw new Error(`output message ${seq} has rows for unknown table ${name}`);
        if (table === null) continue;
        const list = rows.get(table) ?? [];
        for (const r of tableRows as Cell[][]) list.push(r);
        rows.set(table, list);
      }
    }
    const writes: Array<Promise<void>> = [];
    if (events.count > 0)
      writes.push(
        insertEvents(this.store.client, events.body, groupToken('raw', this.streamId, group)).then(
          () => void flushed.inc({ table: 'events' }, events.count),
        ),
      );
    for (const [table, tableRows] of rows) {
      writes.push(
        insertSnapshotRows(this.store.client, table, tableRows, groupToken(table.name, this.streamId, group)).then(
          () => void flushed.inc({ table: table.name }, tableRows.length),
        ),
      );
    }
    await Promise.all(writes);
  }

  /**
   * Stop reading, finish the groups being written, and leave what was read but not yet grouped unacknowledged (out of
   * the heartbeat): JetStream sends it again after the ack wait, to the next flusher. Writing it here too made a stop
   * as long as the backlog read ahead. A nak would not hand it over sooner: the stopping reader's pull request stays
   * open at the server until it expires, and takes the messages back (measured: 15 s either way).
   */
  async stop(): Promise<void> {
    await this.loop?.stop();
    clearTimeout(this.later);
    for (const m of this.pending) this.held.delete(m);
    this.pending = [];
    while (this.inflight.size > 0) await Promise.allSettled(this.inflight);
    clearInterval(this.heartbeat);
  }
}

/** The flush role's writers: a flusher per tier, each on its consumer, every `minIntervalMs` of its tier. */
export function flushTiers(
  bus: Bus,
  store: Store,
  log: Logger,
  minIntervalMs: Readonly<Record<FlushTier, number>> = { live: 0, bulk: 0 },
  options: Partial<Omit<FlusherOptions, 'tier' | 'minIntervalMs'>> = {},
): { start(): Promise<void>; stop(): Promise<void> } {
  const flushers = (['live', 'bulk'] as const).map(
    (tier) => new Flusher(bus, store, log, { ...options, tier, minIntervalMs: minIntervalMs[tier] }),
  );
  return {
    async start() {
      for (const f of flushers) await f.start();
    },
    async stop() {
      await Promise.all(flushers.map((f) => f.stop()));
    },
  };
}
