import {
  headers as natsHeaders,
  type Consumer,
  type JsMsg,
  type MsgHdrs,
  type ObjectStore,
  type StoredMsg,
} from 'nats';
import { Counter, Gauge, Histogram } from 'prom-client';
import { packCheckpoint, readCheckpoint, writeCheckpoint } from '../bus/checkpoints.js';
import { consumeLoop, fetchMessagesCap, type ConsumeLoop } from '../bus/consume-loop.js';
import type { Bus } from '../bus/bus.js';
import {
  decodeSignals,
  encodeSignals,
  frameInput,
  frameOutput,
  inputSeqHeader,
  outputOverhead,
  tableFraming,
  type WireEvent,
} from '../bus/wire.js';
import { EventReader, type ReadEvent } from '../bus/event-reader.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import { DedupWindow, dedupWindowMs, type SavedDedup } from './dedup.js';
import type { Pipeline } from '../metric/pipeline.js';
import { recallSessions } from './recall.js';
import type { EncodedOutput } from './accumulator.js';
import { Aggregation, type SavedState } from './runtime.js';

const events = new Counter({
  name: 'darshak_aggregate_events_total',
  help: 'Events read by aggregators, by outcome (passed on, or dropped as a duplicate event_id)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

const replayed = new Gauge({
  name: 'darshak_aggregate_replayed_messages',
  help: 'Input messages a shard replayed at its last start to rebuild its state (from its checkpoint, else 24 h)',
  labelNames: ['shard'] as const,
  registers: [registry],
});

const openSessions = new Gauge({
  name: 'darshak_aggregate_sessions',
  help: 'Sessions held in memory by a shard',
  labelNames: ['shard'] as const,
  registers: [registry],
});

const remembered = new Gauge({
  name: 'darshak_aggregate_remembered_sessions',
  help: 'Sessions a shard let go of and still remembers (at least 7 days), which it recalls from the store if they play on',
  labelNames: ['shard'] as const,
  registers: [registry],
});

const recalled = new Counter({
  name: 'darshak_aggregate_recalled_sessions_total',
  help: 'Sessions not in memory whose stored events a shard asked for (a late event, or a session playing on after it left memory), by whether the store held events of them',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

const batchSeconds = new Histogram({
  name: 'darshak_aggregate_publish_seconds',
  help: 'Time to publish one flush of a shard (raw events and snapshot rows) to JetStream',
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  registers: [registry],
});

const checkpointSeconds = new Histogram({
  name: 'darshak_aggregate_checkpoint_seconds',
  help: 'Time to checkpoint a shard, by step: packing its state (blocks the shard\u2019s loop) and writing it to the object store',
  labelNames: ['step'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

/** Header on every output message: which batch it belongs to, `<previous batch end>:<part>/<parts>`. */
export const batchHeader = 'Darshak-Batch';

/** What an output message's headers say of progress; a message without the batch header is a whole batch. */
export interface OutputMark {
  /** The last input of the batch before this one. */
  from: number;
  /** The last input of this message's batch. */
  upTo: number;
  part: number;
  /** This is the batch's last part: its whole input is passed on. */
  complete: boolean;
}

export function outputMark(header: MsgHdrs): OutputMark {
  const upTo = Number(header.get(inputSeqHeader)) || 0;
  const batch = /^(\d+):(\d+)\/(\d+)$/.exec(header.get(batchHeader));
  if (!batch) return { from: upTo, upTo, part: 0, complete: true };
  const part = Number(batch[2]);
  return { from: Number(batch[1]), upTo, part, complete: part + 1 >= Number(batch[3]) };
}

/** What one output message holds at most: the server's max_payload, less room for the headers and the framing. */
export const outputLimit = (bus: Bus): number => (bus.nc.info?.max_payload ?? 1_048_576) - 4096;

/** The input one batch covers at most: about twice an output message, whose rows (about a third) fill a part or two. */
export const batchInputLimit = (bus: Bus): number => 2 * outputLimit(bus);

export interface ShardOptions {
  pipelines: readonly Pipeline[];
  /** How often the state is checkpointed (only when it changed). */
  checkpointEveryMs: number;
  /**
   * Where in the interval this shard checkpoints, as a fraction from 0 to 1: packing blocks the process's loop, so the
   * shards of one process take turns instead of all packing in the same second. Default 0.
   */
  checkpointPhase?: number;
  /** Output is sealed and published at least this often (snapshots reach ClickHouse within about twice this). */
  flushIntervalMs: number;
  /** Sealed batches published and not yet acknowledged, at most; input waits beyond it. */
  maxInflight: number;
  /** A session idle (by arrival) longer than this leaves memory. */
  sessionRetainMs: number;
  /** How long a session's progress may wait to be snapshotted (Aggregation `snapshotEveryMs`). */
  snapshotEveryMs: number;
}

/** A checkpoint of another version (an earlier build's) is not read: the shard rebuilds from the store (docs/compatibility.md). */
const checkpointVersion = 8;
type Checkpoint = {
  v: typeof checkpointVersion;
  shard: number;
  passed_up_to: number;
  state: SavedState;
  ids: SavedDedup;
};

interface Batch {
  /** Input (from, upTo] is what it holds. */
  from: number;
  upTo: number;
  parts: Buffer[];
  /**
   * Its detector signals, published after the parts (the alerts role's input); none for an idle batch, which holds
   * no input (from = upTo), only the snapshots of sessions whose progress waited (`Aggregation.drainLingering`).
   */
  signals?: Buffer;
  /** The state right after it, when a checkpoint is due. */
  checkpoint?: Buffer;
}

/**
 * One shard's aggregator. Its state (de-duplication window, sessions, pipeline output) is a function of the shard's
 * input stream read strictly in order, so it can always be rebuilt:
 *
 * - Input is applied message by message; output accumulates and is sealed into a batch every FLUSH_INTERVAL_MS (or
 *   when it would outgrow a message). A batch covers input (from, upTo] and is published as one or more parts with
 *   `Nats-Msg-Id` `<shard>:<upTo>:<part>` and the headers Darshak-Input-Seq: upTo, Darshak-Batch: from:part/parts.
 * - The raw stream is thus the durable record of progress: its last message for the shard says which input was
 *   passed on last. If that message is not a batch's last part, the batch is regenerated (the output is a function
 *   of the state and the input) and only its missing parts are published.
 * - After a batch's parts, its detector signals go to the signals stream (`Nats-Msg-Id` `<shard>:<upTo>:s`). A batch
 *   whose parts are all out but whose signals are not is regenerated the same way, and only its signals published.
 * - Every CHECKPOINT_INTERVAL_MS the state after a batch is written to the object store, once the batch is
 *   acknowledged. At start the checkpoint is loaded, the input after it is replayed without output, and reading
 *   resumes after the last input passed on. A kill -9 at any point neither loses nor doubles anything.
 *
 * Input is read in order by a private reader (`Bus.reader`), not a durable consumer with acknowledgements: a durable
 * consumer redelivers an unacknowledged message only after its ack wait, behind newer ones, and an aggregator's
 * state depends on order.
 */
export class ShardAggregator {
  private dedup = new DedupWindow();
  private readonly reader = new EventReader();
  private agg: Aggregation;
  /** The last input whose output is acknowledged. */
  private passedUpTo = 0;
  /** The last input applied (its output sealed or pending). */
  private appliedUpTo = 0;
  /** The end of the last sealed batch. */
  private sealedUpTo = 0;
  /** Input passed on since the last batch (`frameInput`), and the size of the messages it came in. */
  private pending: Buffer[] = [];
  private pendingInputBytes = 0;
  private sealTimer: NodeJS.Timeout | undefined;
  private publishing: Promise<void> = Promise.resolve();
  /**
   * The last sequences of the shard's raw and signals subjects, as this shard last read or wrote them; every publish
   * expects them. A publish the shard gave up on (its acknowledgement late: the server slow, the connection lost) can
   * still be stored after the shard has rebuilt: landing after the rebuild's own batches, which pass the same input
   * on with other bounds, it would count that input twice. Expected sequences make the server refuse whichever of
   * the two comes second (a rebuild that finds the stale one landed first reads it as the last output).
   */
  private readonly lastSeq = { raw: 0, signals: 0 };
  /**
   * What the store must hold before it answers a recall (contracts/history.ts `stored_through`): `raw`, the raw-stream
   * sequence of an output that covers every session the shard let go of; or, while the last ones let go of are in
   * input whose output is not yet published, that input (`awaiting`), until the output covering it sets `raw`.
   */
  private letGo = { raw: 0, awaiting: 0 };
  private inflight = 0;
  /** Wakes input waiting for room among the batches in flight. */
  private onBatchDone: (() => void) | undefined;
  private failure: Error | undefined;
  private loop: ConsumeLoop | undefined;
  private readonly log: Logger;
  private store: ObjectStore | undefined;
  private checkpointedUpTo = -1;
  private lastCheckpointAt: number;
  private readonly maxPayload: number;
  private readonly maxBatchInput: number;
  private stopping = false;
  private onRebuilt: () => void = () => undefined;

  constructor(
    private readonly bus: Bus,
    readonly shard: number,
    private readonly options: ShardOptions,
    log: Logger,
  ) {
    this.log = log.child({ module: 'aggregate', shard });
    this.agg = new Aggregation(options.pipelines, options.sessionRetainMs, options.snapshotEveryMs);
    // Room for the headers and the message framing under the server's limit.
    this.maxPayload = outputLimit(bus);
    this.maxBatchInput = batchInputLimit(bus);
    this.lastCheckpointAt = Date.now() - options.checkpointEveryMs * (options.checkpointPhase ?? 0);
  }

  /**
   * Start reading. The state is rebuilt first, inside the read loop: a rebuild behind a large backlog takes long and
   * may meet a fault (a NATS restart, a lost connection), and then it is tried again, never fatal to the process.
   * Resolves once the first rebuild is done (or the shard is stopped meanwhile).
   */
  async start(): Promise<void> {
    this.store = await this.bus.objectStore(this.bus.names.checkpointBucket);
    this.failure = new Error('not yet rebuilt');
    const rebuilt = new Promise<void>((resolve) => (this.onRebuilt = resolve));
    this.loop = this.run();
    this.sealTimer = setInterval(() => this.seal(), this.options.flushIntervalMs);
    await rebuilt;
  }

  /** Load the checkpoint, replay the input after it, and finish a batch a crash left half published. */
  private async rebuild(): Promise<void> {
    // Batches still queued settle first (unpublished, after a failure), so the raw stream's last message stays put.
    await this.publishing;
    this.pending = [];
    this.pendingInputBytes = 0;
    const last = await this.lastOutput();
    // Whatever the state forgot before (sessions let go of, or older than a rebuild without a checkpoint reaches) was
    // read from input whose output is out.
    this.letGo = { raw: this.lastSeq.raw, awaiting: 0 };
    const signalled = await this.lastSignalled();
    // The last input whose batch is wholly out, signals included.
    const done = last.complete && signalled >= last.upTo ? last.upTo : last.from;
    const checkpoint = await this.loadCheckpoint();
    // A checkpoint ahead of the raw stream (the stream was purged) describes output that no longer exists.
    const usable = checkpoint !== null && checkpoint.passed_up_to <= done ? checkpoint : null;
    this.dedup = new DedupWindow();
    this.agg = new Aggregation(this.options.pipelines, this.options.sessionRetainMs, this.options.snapshotEveryMs);
    if (usable) {
      this.agg.load(usable.state);
      this.dedup.load(usable.ids, usable.state.watermark);
    }
    this.checkpointedUpTo = usable?.passed_up_to ?? -1;
    const from = usable ? { seq: usable.passed_up_to + 1 } : { time: Date.now() - dedupWindowMs };
    let count = await this.replay(from, done, false);
    this.agg.discard();
    this.passedUpTo = this.appliedUpTo = this.sealedUpTo = done;
    if (last.upTo > done) {
      // A batch (from, upTo] is partly published: regenerate it exactly and publish what is missing.
      count += await this.replay({ seq: done + 1 }, last.upTo, true);
      this.appliedUpTo = last.upTo;
      const batch = this.sealBatch();
      if (batch) {
        const published = last.complete ? batch.parts.length : last.part + 1;
        this.log.warn(
          { from: batch.from, up_to: batch.upTo, parts: batch.parts.length, published },
          'completing a half-published batch',
        );
        await this.publish(batch, published);
      }
    }
    // Only now: a rebuild that fails part-way (the bus is electing leaders) must be done again before reading on.
    this.failure = undefined;
    this.onRebuilt();
    replayed.set({ shard: String(this.shard) }, count);
    this.gaugeSessions();
    this.log.info(
      {
        passed_up_to: this.passedUpTo,
        checkpoint: usable?.passed_up_to ?? null,
        replayed: count,
        remembered_ids: this.dedup.size,
        sessions: this.agg.sessionCount,
        remembered_sessions: this.agg.rememberedCount,
      },
      'shard state rebuilt',
    );
  }

  private async loadCheckpoint(): Promise<Checkpoint | null> {
    return this.store
      ? readCheckpoint<Checkpoint>(
          this.store,
          `shard-${this.shard}`,
          (cp) => cp.v === checkpointVersion && cp.shard === this.shard,
          this.log,
        )
      : null;
  }

  /** Where output stands: the mark of the last message of the shard's raw subject (its batch, and which part). */
  private async lastOutput(): Promise<OutputMark> {
    const m = await this.lastMessage(this.bus.names.rawStream, this.bus.names.rawSubject(this.shard));
    this.lastSeq.raw = m?.seq ?? 0;
    return m ? outputMark(m.header) : { from: 0, upTo: 0, part: 0, complete: true };
  }

  /** The last input whose signals are published. */
  private async lastSignalled(): Promise<number> {
    const m = await this.lastMessage(this.bus.names.signalsStream, this.bus.names.signalsSubject(this.shard));
    this.lastSeq.signals = m?.seq ?? 0;
    return m ? decodeSignals(m.data).up_to : 0;
  }

  private async lastMessage(stream: string, subject: string): Promise<StoredMsg | null> {
    try {
      return await this.bus.jsm.streams.getMessage(stream, { last_by_subj: subject });
    } catch (err) {
      if (/no message found/i.test((err as Error).message)) return null;
      throw err;
    }
  }

  /** Apply input from a sequence or a time up to `upTo`, with or without keeping its raw output; answers the count. */
  private async replay(from: { seq: number } | { time: number }, upTo: number, keep: boolean): Promise<number> {
    if (upTo === 0 || ('seq' in from && from.seq > upTo)) return 0;
    const consumer = await this.bus.reader(this.bus.names.eventsStream, this.bus.names.eventsSubject(this.shard), from);
    try {
      return await this.replayFrom(consumer, upTo, keep);
    } finally {
      await consumer.delete().catch(() => undefined);
    }
  }

  private async replayFrom(consumer: Consumer, upTo: number, keep: boolean): Promise<number> {
    let count = 0;
    let done = false;
    let delivered = 0;
    while (!done) {
      if (this.stopping) throw new Error('stopping');
      let last = 0;
      // Bounded by bytes: at a final's peak input messages are ~100 KB, and 1,000 of them were more than the server
      // lets a connection leave unread (the server then cuts it as a slow consumer, and the rebuild failed).
      const pull = await consumer.fetch({ max_bytes: this.bus.readAheadBytes, expires: 2000 });
      let received = 0;
      for await (const m of pull) {
        if (++received === fetchMessagesCap) pull.stop();
        // A pull's messages lost on the way would leave a hole in the state: fail, and the rebuild is done again.
        if (m.info.deliverySequence !== ++delivered)
          throw new Error(`replay: delivery ${m.info.deliverySequence} after ${delivered - 1}`);
        last = m.seq;
        if (m.seq > upTo) {
          done = true;
          break;
        }
        count++;
        const recalling = this.apply(m.seq, m.data, keep);
        if (recalling) await recalling;
        // Stop at the last one wanted rather than wait out the fetch for messages that are not there.
        if (m.seq === upTo) {
          done = true;
          break;
        }
      }
      // A pull that brought nothing ends the replay only when nothing is left to read (input before `upTo` may have
      // aged out of the stream): one that expired on a busy server must not leave the state short of `upTo`.
      if (last >= upTo || (last === 0 && (await consumer.info()).num_pending === 0)) done = true;
    }
    return count;
  }

  /**
   * Apply one input message. Sessions it brings back that left memory (a late event, or one playing on after a long
   * pause) are first recalled from the store, as they stood before this message: only then is a promise answered, so
   * the usual message costs none.
   */
  private apply(seq: number, data: Uint8Array, keep: boolean): Promise<void> | undefined {
    const { events: input } = this.reader.read(data);
    const late = this.agg.lateUnknownSessions(input);
    if (!late) {
      this.applyInput(seq, data.length, input, keep);
      return undefined;
    }
    // The events read lazily from `data`, which is applied after a wait: read them from a copy of their own.
    const own = Buffer.from(data);
    return this.recall(seq, late).then(() => this.applyInput(seq, own.length, this.reader.read(own).events, keep));
  }

  /**
   * Restore sessions from the events of theirs that the store holds from input before `seq`: what this shard had
   * applied before they left memory. The same question gets the same answer in a replay after a crash, whatever was
   * stored since. Nothing of the message is applied yet, so a batch sealed meanwhile is exact.
   */
  private async recall(seq: number, late: Map<string, Set<string>>): Promise<void> {
    const answers: Array<[tenant: string, sessions: number, history: WireEvent[]]> = [];
    for (const [tenant, ids] of late) {
      const req = {
        tenant,
        sessions: [...ids],
        before_seq: seq,
        received_before: this.agg.watermark - this.options.sessionRetainMs,
        stored_through: await this.letGoOutput(),
      };
      answers.push([tenant, ids.size, await recallSessions(this.bus, req, () => this.stopping, this.log)]);
    }
    // All answered first: a stop while asking leaves the state as it was.
    for (const [tenant, sessions, history] of answers) {
      this.agg.restore(history);
      const found = new Set(history.map((e) => e.session_id)).size;
      recalled.inc({ outcome: 'found' }, found);
      recalled.inc({ outcome: 'none' }, sessions - found);
      this.log.debug(
        { tenant, sessions, found, events: history.length, before_seq: seq },
        'sessions recalled from the store',
      );
    }
  }

  /**
   * The output a recall needs stored. While sessions were let go of in input whose output is not out, that output is
   * sealed and published first: it may hold their last events. (Not in a rebuild: the batch a rebuild regenerates was
   * sealed, in the run it repeats, before any recall that came after a session let go of in it.)
   */
  private async letGoOutput(): Promise<number> {
    while (this.letGo.awaiting > 0) {
      if (this.stopping || this.failure) throw this.failure ?? new Error('stopping while recalling stored sessions');
      this.seal();
      await this.publishing;
    }
    return this.letGo.raw;
  }

  /** De-duplicate a decoded input message and apply what passes to the pipelines; keep it for output. */
  private applyInput(seq: number, bytes: number, input: readonly ReadEvent[], keep: boolean): void {
    const dropped: number[] = [];
    input.forEach((e, index) => {
      const duplicate = e.uuid
        ? !this.dedup.firstSeenUuid(e.tenant, e.id0, e.id1, e.id2, e.id3, e.received_at)
        : e.hasEventId && !this.dedup.firstSeen(e.tenant, String(e.event_id), e.received_at);
      if (duplicate) {
        dropped.push(index);
        return;
      }
      this.agg.apply(e);
    });
    // Input replayed without output has its output in the raw stream already, at or before `letGo.raw`.
    if (this.agg.evictIdle(seq) > 0 && keep) this.letGo.awaiting = seq;
    // By the shard's own clock (latest arrival), not the wall clock, so a replay forgets exactly what the run did.
    this.dedup.expire(this.agg.watermark);
    if (keep) {
      // The output names the input message and its duplicates; the flusher reads its events from the event stream.
      this.pending.push(frameInput(seq, dropped));
      this.pendingInputBytes += bytes;
      events.inc({ outcome: 'passed' }, input.length - dropped.length);
      events.inc({ outcome: 'duplicate' }, dropped.length);
    }
  }

  private run(): ConsumeLoop {
    return consumeLoop({
      bus: this.bus,
      // Reopened after a failure: the state is rebuilt to the last acknowledged output, and reading resumes there.
      open: async () => {
        if (this.failure) await this.rebuild();
        return this.bus.reader(this.bus.names.eventsStream, this.bus.names.eventsSubject(this.shard), {
          seq: this.appliedUpTo + 1,
        });
      },
      ordered: true,
      readAhead: { bytes: this.bus.readAheadBytes },
      handle: (m) => this.handle(m),
      log: this.log,
      onFailure: 'aggregation failed; rebuilding from the last output acknowledged',
    });
  }

  private async handle(m: JsMsg): Promise<void> {
    if (this.failure) throw this.failure;
    if (m.seq <= this.appliedUpTo) return;
    // An input message never straddles two batches: seal first once this one would hold too much input.
    if (this.pendingInputBytes + m.data.length > this.maxBatchInput) this.seal();
    const recalling = this.apply(m.seq, m.data, true);
    if (recalling) await recalling;
    this.appliedUpTo = m.seq;
    // Input waits while the cap of batches in flight is reached, until the oldest is acknowledged (not all of them:
    // reading would stop until the queue was empty, and the shard then sat idle half the time).
    while (this.inflight >= this.options.maxInflight)
      await new Promise<void>((resolve) => (this.onBatchDone = resolve));
  }

  /** Seal the output so far into a batch and queue it for publishing (in order, behind earlier batches). */
  private seal(): void {
    if (this.failure) {
      // Output failed to publish: rebuild and publish it again now, not when the next input happens to arrive.
      if (this.inflight === 0) this.loop?.interrupt();
      return;
    }
    const batch = this.sealBatch() ?? (this.inflight === 0 ? this.idleBatch() : undefined);
    if (!batch) return;
    this.inflight++;
    this.publishing = this.publishing
      // Behind a batch that failed none is published: one out after a gap would mark the gap's output as passed on.
      // The rebuild regenerates them all from the last batch out.
      .then(() => (this.failure ? undefined : this.publish(batch, 0)))
      .catch((err: Error) => {
        this.log.warn({ err: err.message, up_to: batch.upTo }, 'output not published');
        this.failure ??= err;
      })
      .finally(() => {
        this.inflight--;
        this.onBatchDone?.();
      });
  }

  private sealBatch(): Batch | undefined {
    if (this.appliedUpTo === this.sealedUpTo) return undefined;
    const output = this.agg.drainEncoded(this.appliedUpTo);
    const batch: Batch = {
      from: this.sealedUpTo,
      upTo: this.appliedUpTo,
      parts: this.split(this.pending, output),
      signals: encodeSignals({
        v: 1,
        shard: this.shard,
        from: this.sealedUpTo,
        up_to: this.appliedUpTo,
        clock: this.agg.watermark,
        signals: output.signals.map((r) => [r.name, [...r.key], r.at, r.fields]),
      }),
    };
    this.pending = [];
    this.pendingInputBytes = 0;
    this.sealedUpTo = this.appliedUpTo;
    if (Date.now() - this.lastCheckpointAt >= this.options.checkpointEveryMs) {
      this.lastCheckpointAt = Date.now();
      // Taken now, between two inputs, so it is exact for `upTo`; written once the batch is acknowledged.
      batch.checkpoint = this.packState(batch.upTo);
    }
    this.gaugeSessions();
    return batch;
  }

  /** No input since the last batch: the snapshots still waiting, so an answer read now is whole. */
  private idleBatch(): Batch | undefined {
    const output = this.agg.drainLingering(this.sealedUpTo);
    if (!output) return undefined;
    return { from: this.sealedUpTo, upTo: this.sealedUpTo, parts: this.split([], output) };
  }

  private gaugeSessions(): void {
    openSessions.set({ shard: String(this.shard) }, this.agg.sessionCount);
    remembered.set({ shard: String(this.shard) }, this.agg.rememberedCount);
  }

  /** Cut passed inputs and rows into messages under the size limit, always in the same way for the same output. */
  private split(inputs: readonly Buffer[], { rows }: EncodedOutput): Buffer[] {
    const parts: Buffer[] = [];
    let passed: Buffer[] = [];
    /** This part's rows: runs of one table's rows, as (table, first row, count). */
    let runs: Array<[string, number, number]> = [];
    let bytes = outputOverhead;
    const cut = (): void => {
      parts.push(
        frameOutput(
          passed,
          runs.map(([table, first, count]) => [table, count, rows.slice(first, count)] as const),
        ),
      );
      passed = [];
      runs = [];
      bytes = outputOverhead;
    };
    const room = (n: number): void => {
      if (bytes + n > this.maxPayload && bytes > outputOverhead) cut();
      bytes += n;
    };
    for (const input of inputs) {
      room(input.length);
      passed.push(input);
    }
    for (const { name, first, count } of rows.tables) {
      for (let i = first; i < first + count; i++) {
        // A row that starts the table's run in this part brings the table's framing (a part cut here starts one).
        const starts = runs[runs.length - 1]?.[0] !== name;
        room(rows.size(i) + (starts ? tableFraming(name) : 0));
        const run = runs[runs.length - 1];
        if (run?.[0] === name) run[2]++;
        else {
          if (!starts) bytes += tableFraming(name);
          runs.push([name, i, 1]);
        }
      }
    }
    cut();
    return parts;
  }

  /**
   * Publish a batch's parts from `fromPart` on, then its signals; then it is the progress mark, and its checkpoint
   * can be written.
   */
  private async publish(batch: Batch, fromPart: number): Promise<void> {
    const started = process.hrtime.bigint();
    const n = batch.parts.length;
    for (let i = fromPart; i < n; i++) {
      const h = natsHeaders();
      h.set(inputSeqHeader, String(batch.upTo));
      h.set(batchHeader, `${batch.from}:${i}/${n}`);
      const ack = await this.bus.js.publish(this.bus.names.rawSubject(this.shard), batch.parts[i], {
        // An idle batch is not de-duplicated: its rows are a state written before, and one after a restart may
        // share its bounds with one before it.
        msgID: batch.signals ? `${this.shard}:${batch.upTo}:${i}` : undefined,
        headers: h,
        expect: { lastSubjectSequence: this.lastSeq.raw },
      });
      this.lastSeq.raw = ack.seq;
    }
    if (this.letGo.awaiting > 0 && batch.upTo >= this.letGo.awaiting)
      this.letGo = { raw: this.lastSeq.raw, awaiting: 0 };
    if (!batch.signals) return;
    const ack = await this.bus.js.publish(this.bus.names.signalsSubject(this.shard), batch.signals, {
      msgID: `${this.shard}:${batch.upTo}:s`,
      expect: { lastSubjectSequence: this.lastSeq.signals },
    });
    this.lastSeq.signals = ack.seq;
    batchSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
    this.passedUpTo = batch.upTo;
    if (batch.checkpoint) await this.writeCheckpoint(batch.upTo, batch.checkpoint);
  }

  /** The state now, right after the input `upTo`, as a checkpoint. */
  private packState(upTo: number): Buffer {
    const done = checkpointSeconds.startTimer({ step: 'pack' });
    const cp: Checkpoint = {
      v: checkpointVersion,
      shard: this.shard,
      passed_up_to: upTo,
      ids: this.dedup.save(),
      state: this.agg.save(),
    };
    const blob = packCheckpoint(cp);
    done();
    return blob;
  }

  private async writeCheckpoint(upTo: number, blob: Buffer): Promise<void> {
    if (!this.store) return;
    const done = checkpointSeconds.startTimer({ step: 'write' });
    const written = await writeCheckpoint(this.store, `shard-${this.shard}`, blob, this.log);
    done();
    if (written) this.checkpointedUpTo = upTo;
  }

  /** Stop reading, publish what is pending, and leave a checkpoint of the final state. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.onRebuilt();
    clearInterval(this.sealTimer);
    await this.loop?.stop();
    this.lastCheckpointAt = 0;
    this.seal();
    await this.publishing;
    // What waited is written too: the next start may be long after.
    this.seal();
    await this.publishing;
    if (!this.failure && this.passedUpTo !== this.checkpointedUpTo) {
      await this.writeCheckpoint(this.passedUpTo, this.packState(this.passedUpTo));
    }
  }
}
