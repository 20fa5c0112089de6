import { randomBytes } from 'node:crypto';
import { Counter, Histogram } from 'prom-client';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import type { Bus } from './bus.js';
import { frameMessage, frameOverhead } from './wire.js';

export interface PublisherOptions {
  shards: number;
  /** How long a submission may wait for its acknowledgement, queueing included. */
  timeoutMs: number;
  /** Unacknowledged publishes at once; beyond it submissions wait and coalesce into larger messages. */
  maxInflight: number;
  maxMessageBytes: number;
  /** Told of every message acknowledged: its shard, stream sequence and how many events it holds. */
  onAcked?: (shard: number, seq: number, events: number) => void;
}

/** Events of one request bound for one shard, already encoded. */
export interface ShardPart {
  shard: number;
  encoded: Buffer[];
  bytes: number;
}

interface Slice {
  part: ShardPart;
  deadline: number;
  resolve: (acked: boolean[]) => void;
}

const none = (n: number): boolean[] => new Array<boolean>(n).fill(false);

const lost = Symbol('connection lost');

const publishes = new Counter({
  name: 'darshak_bus_publishes_total',
  help: 'JetStream publishes of event messages by outcome',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
const publishLatency = new Histogram({
  name: 'darshak_bus_publish_ack_seconds',
  help: 'Time from publish to JetStream acknowledgement',
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5],
  registers: [registry],
});
const messageEvents = new Histogram({
  name: 'darshak_bus_events_per_message',
  help: 'Events coalesced into one JetStream message',
  buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000],
  registers: [registry],
});

/**
 * Coalesces the shard parts of concurrent requests into one JetStream message per shard per turn of the event
 * loop, and resolves each part only when the message holding it is acknowledged. Nothing is written while the
 * connection is down (nats.js would buffer it and send it after the client was told 503).
 */
export class EventPublisher {
  private readonly queues: Slice[][];
  private inflight = 0;
  private scheduled = false;
  private seq = 0;
  private readonly idPrefix = randomBytes(6).toString('hex');
  private readonly log: Logger;
  private closed = false;
  private idle: (() => void) | undefined;
  /** Settles at the next disconnect; replaced after each. */
  private disconnected!: Promise<typeof lost>;
  private readonly offDisconnect: () => void;

  constructor(
    private readonly bus: Bus,
    private readonly options: PublisherOptions,
    log: Logger,
  ) {
    this.queues = Array.from({ length: options.shards }, () => []);
    this.log = log.child({ module: 'publisher' });
    let signal!: () => void;
    const arm = (): void => {
      this.disconnected = new Promise((r) => (signal = () => r(lost)));
    };
    arm();
    this.offDisconnect = bus.on('disconnect', () => {
      signal();
      arm();
    });
  }

  /**
   * Resolves, for each event of the part, whether it is durably in the stream. A part larger than one message is
   * split, so a bus failure between its messages can leave some of its events acknowledged and others not.
   */
  submit(part: ShardPart): Promise<boolean[]> {
    if (this.closed || !this.bus.connected) return Promise.resolve(none(part.encoded.length));
    return new Promise<boolean[]>((resolve) => {
      (this.queues[part.shard] as Slice[]).push({ part, deadline: Date.now() + this.options.timeoutMs, resolve });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const now = Date.now();
    for (let shard = 0; shard < this.queues.length; shard++) {
      const queue = this.queues[shard] as Slice[];
      while (queue.length > 0 && this.inflight < this.options.maxInflight) {
        if (!this.bus.connected) {
          for (const s of queue.splice(0)) s.resolve(none(s.part.encoded.length));
          break;
        }
        const batch = this.take(queue, now);
        if (batch.length > 0) void this.send(shard, batch);
      }
    }
    this.checkIdle();
  }

  /** Slices for one message: as many as fit, or one slice alone (split later) if it is larger than a message. */
  private take(queue: Slice[], now: number): Slice[] {
    const batch: Slice[] = [];
    let bytes = frameOverhead;
    while (queue.length > 0) {
      const next = queue[0] as Slice;
      if (next.deadline <= now) {
        queue.shift();
        next.resolve(none(next.part.encoded.length));
        continue;
      }
      if (batch.length > 0 && bytes + next.part.bytes > this.options.maxMessageBytes) break;
      queue.shift();
      batch.push(next);
      bytes += next.part.bytes;
    }
    return batch;
  }

  private async send(shard: number, batch: Slice[]): Promise<void> {
    const encoded: Buffer[] = [];
    for (const s of batch) for (const e of s.part.encoded) encoded.push(e);
    const deadline = Math.min(...batch.map((s) => s.deadline));
    const messages = this.split(encoded);
    this.inflight++;
    try {
      const results = await Promise.all(messages.map((m) => this.publishOne(shard, m.data, m.count, deadline)));
      const acked: boolean[] = [];
      messages.forEach((m, i) => {
        for (let j = 0; j < m.count; j++) acked.push(results[i] as boolean);
      });
      let at = 0;
      for (const s of batch) {
        const n = s.part.encoded.length;
        s.resolve(acked.slice(at, at + n));
        at += n;
      }
    } finally {
      this.inflight--;
      if (this.queues.some((q) => q.length > 0)) this.schedule();
      this.checkIdle();
    }
  }

  private split(encoded: Buffer[]): Array<{ data: Buffer; count: number }> {
    const out: Array<{ data: Buffer; count: number }> = [];
    let group: Buffer[] = [];
    let bytes = 0;
    const close = (): void => {
      out.push({ data: frameMessage(group, bytes), count: group.length });
      messageEvents.observe(group.length);
    };
    for (const e of encoded) {
      if (group.length > 0 && frameOverhead + bytes + e.length > this.options.maxMessageBytes) {
        close();
        group = [];
        bytes = 0;
      }
      group.push(e);
      bytes += e.length;
    }
    if (group.length > 0) close();
    return out;
  }

  /**
   * Publish with a message id, retrying the same id until acknowledged or late. JetStream de-duplicates the id, so a
   * retry of a message that was stored before its acknowledgement was lost is acknowledged without a second copy.
   * An acknowledgement never outlives its connection: on a disconnect the wait is given up, and the message sent
   * again once the connection is back (or the deadline passes while it is not).
   */
  private async publishOne(shard: number, data: Buffer, events: number, deadline: number): Promise<boolean> {
    const msgID = `${this.idPrefix}-${(this.seq++).toString(36)}`;
    const subject = this.bus.names.eventsSubject(shard);
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        publishes.inc({ outcome: 'failed' });
        return false;
      }
      if (!this.bus.connected) {
        await new Promise((r) => setTimeout(r, Math.min(25, remaining)));
        continue;
      }
      const started = process.hrtime.bigint();
      const ack = this.bus.js.publish(subject, data, { msgID, timeout: Math.max(remaining, 50) });
      try {
        const acked = await Promise.race([ack, this.disconnected]);
        if (acked === lost) {
          ack.catch(() => undefined);
          continue;
        }
        this.options.onAcked?.(shard, acked.seq, events);
        publishLatency.observe(Number(process.hrtime.bigint() - started) / 1e9);
        publishes.inc({ outcome: 'acked' });
        return true;
      } catch (err) {
        this.log.warn({ err: (err as Error).message, subject, msgID }, 'publish not acknowledged; retrying');
        await new Promise((r) => setTimeout(r, Math.min(100, Math.max(0, deadline - Date.now()))));
      }
    }
  }

  private checkIdle(): void {
    if (this.idle && this.inflight === 0 && this.queues.every((q) => q.length === 0)) this.idle();
  }

  /** Stop taking submissions and wait for what is queued or in flight to settle. */
  async drain(): Promise<void> {
    this.closed = true;
    this.offDisconnect();
    if (this.inflight === 0 && this.queues.every((q) => q.length === 0)) return;
    await new Promise<void>((resolve) => {
      this.idle = resolve;
      this.schedule();
    });
  }
}
