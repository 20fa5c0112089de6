import { ConsumerEvents, type Consumer, type ConsumerMessages, type JsMsg } from 'nats';
import type { Logger } from '../log.js';
import type { Bus } from './bus.js';

export interface ConsumeLoopOptions {
  /**
   * A reconnect ends the current read and opens a new one. nats.js stops watching heartbeats while disconnected and,
   * after a reconnect, asks about the consumer until it answers, without a word: when the consumer's server was the
   * one lost and the cluster is still electing, a shard's reader was seen waiting there for minutes.
   */
  bus: Pick<Bus, 'on'>;
  /** Open the consumer to read; called again after a failure, so it decides where reading resumes. */
  open(): Promise<Consumer>;
  /**
   * What is fetched ahead of `handle`: a count of messages, or bytes for a stream of large messages (at least twice
   * its largest message: `Bus.readAheadBytes`). What a connection has pulled and not yet read counts against the
   * server's slow-consumer limit, so a reader of messages of up to 1 MB bounds its pulls by bytes.
   */
  readAhead: { messages: number } | { bytes: number };
  /** One message at a time, in delivery order; a throw ends this read and opens a new one. */
  handle(m: JsMsg): Promise<void>;
  log: Logger;
  /** What a failure means, for the log. */
  onFailure: string;
  /**
   * A private reader (`Bus.reader`): a gap in the delivery sequence (a pull's messages lost on the way) ends the
   * read, and the reader is deleted when a read ends. Not for durable consumers that processes share.
   */
  ordered?: boolean;
}

export interface ConsumeLoop {
  /** Stop reading and wait for the message under way. */
  stop(): Promise<void>;
  /** End the current read: the loop opens a new one at once (`open` decides where it resumes). */
  interrupt(): void;
}

/** A pull waits this long; the server sends a heartbeat every half of it while it has nothing to send. */
const pullExpiresMs = 10_000;

/**
 * End a read whose consumer is gone while the connection stays up: its heartbeats stop (or it is reported missing),
 * and nats.js only reports it. Ending the read makes the loop open a new one (`open` decides where it resumes). A
 * lost server is handled by the reconnect listener below: nats.js watches no heartbeats across a reconnect.
 */
async function watch(messages: ConsumerMessages, log: Logger): Promise<void> {
  for await (const s of await messages.status()) {
    const lost = s.type === ConsumerEvents.HeartbeatsMissed ? Number(s.data) >= 2 : s.type === ConsumerEvents.ConsumerNotFound || s.type === ConsumerEvents.ConsumerDeleted || s.type === ConsumerEvents.StreamNotFound;
    if (lost) {
      log.warn({ event: s.type, data: s.data }, 'consumer lost; reading again');
      messages.stop();
      return;
    }
  }
}

/** The read loop every JetStream reader here shares: message by message, reopened after a failure, stoppable. */
export function consumeLoop(options: ConsumeLoopOptions): ConsumeLoop {
  let stopped = false;
  let messages: ConsumerMessages | undefined;
  const run = async (): Promise<void> => {
    while (!stopped) {
      let consumer: Consumer | undefined;
      try {
        consumer = await options.open();
        // Pulls for more once half the bytes are read, and only then, so each asks for at least half: a pull for less
        // than the next message is refused by the server (409, "Message Size Exceeds MaxBytes") and nats.js pulls
        // again at once, a loop that kept nats-server busy and the shards stalled. nats.js also caps a byte pull at
        // 100 messages and would pull again by that count (75 % of it by default) whatever the bytes: -1 turns that off.
        const ahead =
          'bytes' in options.readAhead
            ? { max_bytes: options.readAhead.bytes, threshold_bytes: options.readAhead.bytes / 2, threshold_messages: -1 }
            : { max_messages: options.readAhead.messages };
        const current = await consumer.consume({ ...ahead, expires: pullExpiresMs });
        messages = current;
        void watch(current, options.log);
        let delivered = 0;
        for await (const m of current) {
          if (options.ordered && m.info.deliverySequence !== ++delivered) throw new Error(`delivery ${m.info.deliverySequence} after ${delivered - 1}: messages lost on the way`);
          await options.handle(m);
          if (stopped) break;
        }
      } catch (err) {
        if (stopped) break;
        options.log.warn({ err: (err as Error).message }, options.onFailure);
        // Give up the old read's pull requests before opening another.
        messages?.stop();
        await new Promise((r) => setTimeout(r, 250));
      } finally {
        if (options.ordered) consumer?.delete().catch(() => undefined);
      }
    }
  };
  const loop = run();
  const offReconnect = options.bus.on('reconnect', () => {
    options.log.info('NATS reconnected; reading again');
    messages?.stop();
  });
  return {
    async stop() {
      stopped = true;
      offReconnect();
      messages?.stop();
      await loop;
    },
    interrupt() {
      messages?.stop();
    },
  };
}
