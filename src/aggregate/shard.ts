import { Packr } from 'msgpackr';
import { DeliverPolicy, headers as natsHeaders, type JsMsg, type ObjectStore } from 'nats';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import { Counter, Gauge } from 'prom-client';
import type { Bus } from '../bus/bus.js';
import { decodeMessage, encodeEvent, frameMessage, inputSeqHeader, type RawEvent } from '../bus/wire.js';
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
  /** How often the state is checkpointed (only when it changed). */
  checkpointEveryMs: number;
}

/** What a checkpoint holds: the state after input `passed_up_to`. */
interface Checkpoint {
  v: 1;
  shard: number;
  passed_up_to: number;
  ids: Array<[string, number]>;
}

const checkpointCodec = new Packr({ useRecords: false });

const replayed = new Gauge({
  name: 'darshak_aggregate_replayed_messages',
  help: 'Input messages a shard replayed at its last start to rebuild its state (from its checkpoint, else 24 h)',
  labelNames: ['shard'] as const,
  registers: [registry],
});

/**
 * One shard's aggregator. Its state is a function of the shard's input stream, read strictly in stream order, so it
 * can always be rebuilt:
 *
 * - The output of input message s is published, in order, with `Nats-Msg-Id` `<shard>:<s>` and the header
 *   Darshak-Input-Seq: s. The raw stream is therefore the durable record of progress: its last message for the shard
 *   says which input was passed on last (L).
 * - Every CHECKPOINT_INTERVAL_MS the state (the dedup window) is written with its input sequence C to the object
 *   store. At start it is loaded, the input (C, L] is replayed into it, and reading resumes at L + 1; without a
 *   checkpoint the replay covers the last 24 h. A kill -9 at any point neither loses nor doubles an event.
 *
 * Input is read with an ordered consumer, not a durable one with acknowledgements: a durable consumer redelivers an
 * unacknowledged message only after its ack wait, behind newer ones, and an aggregator's state depends on order.
 * The input stream keeps messages by age (limits retention), so nothing needs acknowledging.
 */
export class ShardAggregator {
  private readonly dedup = new DedupWindow();
  private passedUpTo = 0;
  private loop: ConsumeLoop | undefined;
  private readonly log: Logger;
  private store: ObjectStore | undefined;
  private checkpointedUpTo = -1;
  private lastCheckpointAt = Date.now();
  private checkpointing: Promise<void> | undefined;
  private replayedAtStart = 0;

  constructor(
    private readonly bus: Bus,
    readonly shard: number,
    private readonly options: ShardOptions,
    log: Logger,
  ) {
    this.log = log.child({ module: 'aggregate', shard });
  }

  async start(): Promise<void> {
    this.store = await this.bus.js.views.os(this.bus.names.checkpointBucket);
    const upTo = await this.lastPassed();
    const checkpoint = await this.loadCheckpoint();
    // A checkpoint ahead of the raw stream (the stream was purged) describes output that no longer exists.
    const usable = checkpoint !== null && checkpoint.passed_up_to <= upTo ? checkpoint : null;
    if (usable) this.dedup.load(usable.ids, Date.now());
    this.passedUpTo = upTo;
    this.checkpointedUpTo = usable?.passed_up_to ?? -1;
    const count = await this.replay(usable ? { seq: usable.passed_up_to + 1 } : { time: Date.now() - dedupWindowMs }, upTo);
    replayed.set({ shard: String(this.shard) }, count);
    this.log.info({ passed_up_to: upTo, checkpoint: usable?.passed_up_to ?? null, replayed: count, remembered_ids: this.dedup.size }, 'shard state rebuilt');
    this.loop = this.run();
  }

  private async loadCheckpoint(): Promise<Checkpoint | null> {
    try {
      const blob = await this.store?.getBlob(`shard-${this.shard}`);
      if (!blob) return null;
      const cp = checkpointCodec.unpack(blob) as Checkpoint;
      return cp.v === 1 && cp.shard === this.shard ? cp : null;
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'checkpoint unreadable; rebuilding from the stream');
      return null;
    }
  }

  private maybeCheckpoint(): void {
    if (this.checkpointing || this.passedUpTo === this.checkpointedUpTo) return;
    if (Date.now() - this.lastCheckpointAt < this.options.checkpointEveryMs) return;
    this.checkpointing = this.checkpoint().finally(() => (this.checkpointing = undefined));
  }

  /** The state as of now, taken synchronously between two input messages, then written. */
  private async checkpoint(): Promise<void> {
    const cp: Checkpoint = { v: 1, shard: this.shard, passed_up_to: this.passedUpTo, ids: this.dedup.entries() };
    this.lastCheckpointAt = Date.now();
    try {
      await this.store?.putBlob({ name: `shard-${this.shard}` }, checkpointCodec.pack(cp));
      this.checkpointedUpTo = cp.passed_up_to;
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'checkpoint not written; the next one will be');
    }
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

  /** Replay input from a sequence or a time up to `upTo` into the dedup window; answers the messages replayed. */
  private async replay(from: { seq: number } | { time: number }, upTo: number): Promise<number> {
    this.replayedAtStart = 0;
    if (upTo === 0 || ('seq' in from && from.seq > upTo)) return 0;
    const consumer = await this.bus.js.consumers.get(this.bus.names.eventsStream, {
      filterSubjects: this.bus.names.eventsSubject(this.shard),
      ...('seq' in from
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from.seq }
        : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(from.time).toISOString() }),
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
        this.replayedAtStart++;
        // As live processing did: an id is remembered from its first passage, never from a duplicate's arrival.
        for (const e of decodeMessage(m.data).events) {
          if (e.event_id !== undefined && !this.dedup.has(e.tenant, e.event_id, e.received_at)) this.dedup.remember(e.tenant, e.event_id, e.received_at);
        }
      }
      if (last === 0 || last >= upTo) done = true;
    }
    await consumer.delete().catch(() => undefined);
    return this.replayedAtStart;
  }

  private run(): ConsumeLoop {
    return consumeLoop({
      // Reopened after a failure at the first input not passed on: nothing processed after a failure is kept.
      open: () =>
        this.bus.js.consumers.get(this.bus.names.eventsStream, {
          filterSubjects: this.bus.names.eventsSubject(this.shard),
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: this.passedUpTo + 1,
        }),
      readAhead: this.options.readAhead,
      handle: (m) => this.handle(m),
      log: this.log,
      onFailure: 'aggregation failed; resuming after the last input passed on',
    });
  }

  /** Drop duplicate event_ids, publish what passes, and only then remember the ids it carried. */
  private async handle(m: JsMsg): Promise<void> {
    if (m.seq <= this.passedUpTo) return;
    const fresh: Array<[string, string, number]> = [];
    const inMessage = new Set<string>();
    const encoded: Buffer[] = [];
    let bytes = 0;
    let dropped = 0;
    decodeMessage(m.data).events.forEach((e, index) => {
      if (e.event_id !== undefined) {
        const key = DedupWindow.key(e.tenant, e.event_id);
        if (inMessage.has(key) || this.dedup.has(e.tenant, e.event_id, e.received_at)) {
          dropped++;
          return;
        }
        inMessage.add(key);
        fresh.push([e.tenant, e.event_id, e.received_at]);
      }
      const raw: RawEvent = { ...e, ingest_seq: m.seq, ingest_index: index };
      const b = encodeEvent(raw);
      encoded.push(b);
      bytes += b.length;
    });
    // Published even when empty: the raw stream records that input s was handled.
    const h = natsHeaders();
    h.set(inputSeqHeader, String(m.seq));
    await this.bus.js.publish(this.bus.names.rawSubject(this.shard), frameMessage(encoded, bytes), { msgID: `${this.shard}:${m.seq}`, headers: h });
    for (const [tenant, id, at] of fresh) this.dedup.remember(tenant, id, at);
    this.passedUpTo = m.seq;
    this.dedup.expire(Date.now());
    this.maybeCheckpoint();
    events.inc({ outcome: 'passed' }, encoded.length);
    events.inc({ outcome: 'duplicate' }, dropped);
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
    await this.checkpointing;
    if (this.passedUpTo !== this.checkpointedUpTo) await this.checkpoint();
  }
}
