import { AckPolicy, DeliverPolicy, type JsMsg } from 'nats';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import { Counter, Histogram } from 'prom-client';
import type { Bus } from '../bus/bus.js';
import { decodeMessage, type RawEvent } from '../bus/wire.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import { eventRow, insertEvents } from '../store/events.js';
import type { Store } from '../store/store.js';

const flushed = new Counter({ name: 'darshak_flush_events_total', help: 'Raw events written to ClickHouse', registers: [registry] });
const flushLatency = new Histogram({
  name: 'darshak_flush_insert_seconds',
  help: 'Time of one ClickHouse insert of raw events',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

/**
 * Writes the raw stream to the `events` table: one insert per raw message (each holds a whole aggregation round),
 * with the message's stream sequence as its de-duplication token, acknowledged only after the insert returns. A
 * redelivered message, however the fetches group it, carries the same token and is not stored twice.
 */
export class Flusher {
  private loop: ConsumeLoop | undefined;
  private readonly log: Logger;

  constructor(
    private readonly bus: Bus,
    private readonly store: Store,
    log: Logger,
  ) {
    this.log = log.child({ module: 'flush' });
  }

  async start(): Promise<void> {
    const name = 'flush';
    await this.bus.jsm.consumers.add(this.bus.names.rawStream, {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 60_000_000_000,
      max_ack_pending: 1000,
    });
    const consumer = await this.bus.js.consumers.get(this.bus.names.rawStream, name);
    this.loop = consumeLoop({
      open: async () => consumer,
      readAhead: 100,
      handle: (m) => this.write(m),
      log: this.log,
      onFailure: 'flush failed; its unacknowledged messages will come again',
    });
  }

  private async write(m: JsMsg): Promise<void> {
    const events = decodeMessage(m.data).events as RawEvent[];
    const started = process.hrtime.bigint();
    await insertEvents(
      this.store.client,
      events.map((e) => eventRow(e, e.ingest_seq, e.ingest_index)),
      `raw:${m.seq}`,
    );
    flushLatency.observe(Number(process.hrtime.bigint() - started) / 1e9);
    flushed.inc(events.length);
    m.ack();
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
  }
}
