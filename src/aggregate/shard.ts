import { DeliverPolicy, headers as natsHeaders, type ConsumerMessages, type JsMsg } from 'nats';
import { Counter } from 'prom-client';
import type { Bus } from '../bus/bus.js';
import { decodeMessage, encodeEvent, frameMessage, inputSeqHeader, type RawEvent, type WireEvent } from '../bus/wire.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import { DedupWindow, dedupWindowMs } from './dedup.js';

const events = new Counter({
  name: 'darshak_aggregate_events_total',
  help: 'Events read by aggregators, by outcome (passed on, or dropped as a duplicate event_id)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export interface ShardOptions {
  /** Input messages read ahead of processing. */
  readAhead: number;
}

/**
 * One shard's aggregator. Its state is a function of the shard's input stream, read strictly in stream order, so it
 * can always be rebuilt:
 *
 * - The output of input message s is published, in order, with `Nats-Msg-Id` `<shard>:<s>` and the header
 *   Darshak-Input-Seq: s. The raw stream is therefore the durable record of progress: its last message for the shard
 *   says which input was passed on last (L).
 * - At start the dedup window is rebuilt from the input of the last 24 h up to L, and reading resumes at L + 1. A
 *   kill -9 at any point neither loses nor doubles an event.
 *
 * Input is read with an ordered consumer, not a durable one with acknowledgements: a durable consumer redelivers an
 * unacknowledged message only after its ack wait, behind newer ones, and an aggregator's state depends on order.
 * The input stream keeps messages by age (limits retention), so nothing needs acknowledging.
 */
export class ShardAggregator {
  private readonly dedup = new DedupWindow();
  private passedUpTo = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private messages: ConsumerMessages | undefined;
  private readonly log: Logger;

  constructor(
    private readonly bus: Bus,
    readonly shard: number,
    private readonly options: ShardOptions,
    log: Logger,
  ) {
    this.log = log.child({ module: 'aggregate', shard });
  }

  async start(): Promise<void> {
    this.passedUpTo = await this.lastPassed();
    const rebuilt = await this.rebuild(this.passedUpTo);
    this.log.info({ passed_up_to: this.passedUpTo, remembered_ids: rebuilt }, 'shard state rebuilt');
    this.loop = this.run();
  }

  private async lastPassed(): Promise<number> {
    try {
      const m = await this.bus.jsm.streams.getMessage(this.bus.names.rawStream, { last_by_subj: this.bus.names.rawSubject(this.shard) });
      return Number(m.header.get(inputSeqHeader)) || 0;
    } catch (err) {
      if (/no message found/i.test((err as Error).message)) return 0;
      throw err;
    }
  }

  /** Replay the input of the last 24 h up to `upTo` into the dedup window. */
  private async rebuild(upTo: number): Promise<number> {
    if (upTo === 0) return 0;
    const consumer = await this.bus.js.consumers.get(this.bus.names.eventsStream, {
      filterSubjects: this.bus.names.eventsSubject(this.shard),
      deliver_policy: DeliverPolicy.StartTime,
      opt_start_time: new Date(Date.now() - dedupWindowMs).toISOString(),
    });
    let done = false;
    while (!done) {
      let last = 0;
      for await (const m of await consumer.fetch({ max_messages: 1000, expires: 2000 })) {
        last = m.seq;
        if (m.seq > upTo) {
          done = true;
          break;
        }
        // As live processing did: an id is remembered from its first passage, never from a duplicate's arrival.
        for (const e of decodeMessage(m.data).events) {
          if (e.event_id !== undefined && !this.dedup.has(e.tenant, e.event_id, e.received_at)) this.dedup.remember(e.tenant, e.event_id, e.received_at);
        }
      }
      if (last === 0 || last >= upTo) done = true;
    }
    await consumer.delete().catch(() => undefined);
    return this.dedup.size;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const consumer = await this.bus.js.consumers.get(this.bus.names.eventsStream, {
          filterSubjects: this.bus.names.eventsSubject(this.shard),
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: this.passedUpTo + 1,
        });
        this.messages = await consumer.consume({ max_messages: this.options.readAhead });
        for await (const m of this.messages) {
          await this.handle(m);
          if (this.stopped) break;
        }
      } catch (err) {
        if (this.stopped) break;
        // Read again from the first input not passed on: nothing processed after a failure is kept.
        this.log.warn({ err: (err as Error).message, passed_up_to: this.passedUpTo }, 'aggregation failed; resuming after the last input passed on');
        this.messages?.stop();
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** Drop duplicate event_ids, publish what passes, and only then remember the ids it carried. */
  private async handle(m: JsMsg): Promise<void> {
    if (m.seq <= this.passedUpTo) return;
    const passed: WireEvent[] = [];
    const encoded: Buffer[] = [];
    let bytes = 0;
    const inMessage = new Set<string>();
    let dropped = 0;
    decodeMessage(m.data).events.forEach((e, index) => {
      if (e.event_id !== undefined) {
        const key = `${e.tenant}\u0000${e.event_id}`;
        if (inMessage.has(key) || this.dedup.has(e.tenant, e.event_id, e.received_at)) {
          dropped++;
          return;
        }
        inMessage.add(key);
      }
      const raw: RawEvent = { ...e, ingest_seq: m.seq, ingest_index: index };
      const b = encodeEvent(raw);
      passed.push(e);
      encoded.push(b);
      bytes += b.length;
    });
    // Published even when empty: the raw stream records that input s was handled.
    const h = natsHeaders();
    h.set(inputSeqHeader, String(m.seq));
    await this.bus.js.publish(this.bus.names.rawSubject(this.shard), frameMessage(encoded, bytes), { msgID: `${this.shard}:${m.seq}`, headers: h });
    for (const e of passed) if (e.event_id !== undefined) this.dedup.remember(e.tenant, e.event_id, e.received_at);
    this.passedUpTo = m.seq;
    this.dedup.expire(Date.now());
    events.inc({ outcome: 'passed' }, passed.length);
    events.inc({ outcome: 'duplicate' }, dropped);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.messages?.stop();
    await this.loop;
  }
}
