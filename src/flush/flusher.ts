import { AckPolicy, DeliverPolicy, type JsMsg } from 'nats';
import { Counter, Histogram } from 'prom-client';
import { snapshotTables } from '../../pipelines/index.js';
import type { TableSpec } from '../aggregate/pipeline.js';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import type { Bus } from '../bus/bus.js';
import { decodeOutput, forEachPassed } from '../bus/wire.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import { eventRow, insertEvents, type EventRow } from '../store/events.js';
import { insertSnapshotRows } from '../store/snapshots.js';
import type { Store } from '../store/store.js';

const flushed = new Counter({
  name: 'darshak_flush_rows_total',
  help: 'Rows written to ClickHouse, by table',
  labelNames: ['table'] as const,
  registers: [registry],
});
const flushLatency = new Histogram({
  name: 'darshak_flush_insert_seconds',
  help: 'Time to write one aggregator output message to ClickHouse (all its tables)',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

/** How long a delivered message may go unacknowledged (and without a heartbeat) before JetStream sends it again. */
const ackWaitMs = 15_000;

export interface FlusherOptions {
  /** Output messages being written at once, at most. */
  maxInflight: number;
}

/**
 * Writes the raw stream to ClickHouse: each message's raw events to `events` and its snapshot rows to the pipelines'
 * tables, one insert per table, with `<table>:<stream>:<sequence>` as the de-duplication token (`<stream>` is the
 * stream's creation time: a stream made again, whose sequences restart at 1, must not have its writes taken for
 * duplicates of the old one's), and acknowledges the
 * message only once every insert has returned. A redelivered message, however the fetches group it, carries the same
 * tokens and is not stored twice. Messages are independent (sums, appends, versioned replacements), so several are
 * written at once.
 */
export class Flusher {
  private loop: ConsumeLoop | undefined;
  private readonly log: Logger;
  private readonly tables = new Map<string, TableSpec>(snapshotTables.map((t) => [t.name, t]));
  private readonly inflight = new Set<Promise<void>>();
  private failure: Error | undefined;
  private streamId = '';

  constructor(
    private readonly bus: Bus,
    private readonly store: Store,
    log: Logger,
    private readonly options: FlusherOptions = { maxInflight: 8 },
  ) {
    this.log = log.child({ module: 'flush' });
  }

  async start(): Promise<void> {
    const name = 'flush';
    await this.bus.ensureConsumer(this.bus.names.rawStream, {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: ackWaitMs * 1_000_000,
      max_ack_pending: 1000,
    });
    const consumer = await this.bus.js.consumers.get(this.bus.names.rawStream, name);
    this.streamId = Date.parse((await this.bus.jsm.streams.info(this.bus.names.rawStream)).created).toString(36);
    this.loop = consumeLoop({
      bus: this.bus,
      open: async () => {
        this.failure = undefined;
        return consumer;
      },
      readAhead: 100,
      handle: (m) => this.handle(m),
      log: this.log,
      onFailure: 'flush failed; its unacknowledged messages will come again',
    });
  }

  private async handle(m: JsMsg): Promise<void> {
    if (this.failure) throw this.failure;
    const p = this.write(m)
      .catch((err: Error) => {
        // Not acknowledged: JetStream sends it again after the ack wait.
        this.failure ??= err;
      })
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
    if (this.inflight.size >= this.options.maxInflight) await Promise.race(this.inflight);
  }

  private async write(m: JsMsg): Promise<void> {
    // A long insert says it is still at work, so the ack wait can be short: after a flusher is killed, its
    // unacknowledged messages go to another within the ack wait, not a minute later.
    const heartbeat = setInterval(() => m.working(), ackWaitMs / 3);
    try {
      await this.writeOnce(m);
    } finally {
      clearInterval(heartbeat);
    }
  }

  private async writeOnce(m: JsMsg): Promise<void> {
    const out = decodeOutput(m.data);
    const started = process.hrtime.bigint();
    const writes: Array<Promise<void>> = [];
    const eventRows: EventRow[] = [];
    forEachPassed(out, (e, seq, index) => eventRows.push(eventRow(e, seq, index)));
    if (eventRows.length > 0) {
      writes.push(insertEvents(this.store.client, eventRows, `raw:${this.streamId}:${m.seq}`).then(() => void flushed.inc({ table: 'events' }, eventRows.length)));
    }
    for (const [name, rows] of Object.entries(out.rows ?? {})) {
      const table = this.tables.get(name);
      if (!table) throw new Error(`output message ${m.seq} has rows for unknown table ${name}`);
      writes.push(insertSnapshotRows(this.store.client, table, rows as Array<Array<string | number | null>>, `${name}:${this.streamId}:${m.seq}`).then(() => void flushed.inc({ table: name }, rows.length)));
    }
    await Promise.all(writes);
    flushLatency.observe(Number(process.hrtime.bigint() - started) / 1e9);
    m.ack();
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
    await Promise.allSettled(this.inflight);
  }
}
