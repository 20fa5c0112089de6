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
   * What is fetched ahead of `handle`: a count of messages, or bytes for a stream of large messages (at least its
   * largest message: `Bus.readAheadBytes`). What a connection has pulled and not yet read counts against the
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
 * nats.js asks a pull bounded by bytes for at most 100 messages, and a fetch whose count is filled waits out its
 * expiry (the server says nothing when it ends a pull by count): whoever fetches by bytes ends the fetch itself at
 * its 100th message and fetches again.
 */
export const fetchMessagesCap = 100;

/**
 * End a read whose consumer is gone while the connection stays up: its heartbeats stop (or it is reported missing),
 * and nats.js only reports it. Ending the read makes the loop open a new one (`open` decides where it resumes). A
 * lost server is handled by the reconnect listener below: nats.js watches no heartbeats across a reconnect.
 *
 * A reader that is busy is not lost: the server sends nothing more (no heartbeat either) once a pull is filled, and
 * nats.js pulls again only as messages are handled, so a reader whose handler takes long (an overloaded process)
 * misses heartbeats while its consumer is fine. `busy` tells: messages fetched and not handled, or one being handled.
 */
async function watch(messages: ConsumerMessages, busy: () => boolean, log: Logger, onLost: () => void): Promise<void> {
  for await (const s of await messages.status()) {
    const missed = s.type === ConsumerEvents.HeartbeatsMissed && Number(s.data) >= 2 && !busy();
    const lost =
      missed ||
      s.type === ConsumerEvents.ConsumerNotFound ||
      s.type === ConsumerEvents.ConsumerDeleted ||
      s.type === ConsumerEvents.StreamNotFound;
    if (lost) {
      log.warn({ event: s.type, data: s.data }, 'consumer lost; reading again');
      onLost();
      return;
    }
  }
}

/** The read loop every JetStream reader here shares: message by message, reopened after a failure, stoppable. */
export function consumeLoop(options: ConsumeLoopOptions): ConsumeLoop {
  let stopped = false;
  let messages: ConsumerMessages | undefined;
  /** Set when the current read is to end (a lost consumer, a reconnect, `interrupt`): the loop opens a new one. */
  let readEnded = false;
  const endRead = (): void => {
    readEnded = true;
    messages?.stop();
  };
  const run = async (): Promise<void> => {
    while (!stopped) {
      let consumer: Consumer | undefined;
      readEnded = false;
      try {
        consumer = await options.open();
        let delivered = 0;
        let handling = false;
        let received = 0;
        /** Handle a pull's messages as they come; false once the loop stops. */
        const drain = async (current: ConsumerMessages): Promise<boolean> => {
          messages = current;
          // Ended while it was being opened (a SIGTERM as the role starts): nothing may come to end it otherwise.
          if (readEnded || stopped) current.stop();
          void watch(current, () => handling || current.getPending() > 0, options.log, endRead);
          received = 0;
          for await (const m of current) {
            if (++received === fetchMessagesCap && 'bytes' in options.readAhead) current.stop();
            if (options.ordered && m.info.deliverySequence !== ++delivered)
              throw new Error(`delivery ${m.info.deliverySequence} after ${delivered - 1}: messages lost on the way`);
            handling = true;
            try {
              await options.handle(m);
            } finally {
              handling = false;
            }
            if (stopped) return false;
          }
          return true;
        };
        if ('messages' in options.readAhead)
          await drain(await consumer.consume({ max_messages: options.readAhead.messages, expires: pullExpiresMs }));
        else {
          // One pull of the whole budget at a time, each asked for once the last is handled. nats.js's refilling
          // consume cannot bound by bytes: it caps a byte pull at 100 messages, and a pull the server ends by that
          // count leaves the bytes it did not fill counted as pending, so the refills shrink until one asks for less
          // than the next message, which the server refuses (409) and nats.js asks again at once: nats-server at
          // 60 % CPU and the shards stalled, or a reader that stopped pulling until its heartbeats were missed.
          while (
            !readEnded &&
            !stopped &&
            (await drain(await consumer.fetch({ max_bytes: options.readAhead.bytes, expires: pullExpiresMs })))
          ) {
            // A fetch that brought nothing may be one of a consumer whose server was lost (the connection, on another
            // server, stays up): asking for the consumer throws then, and the read is opened again.
            if (received === 0 && !readEnded && !stopped) await consumer.info();
          }
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
    endRead();
  });
  return {
    async stop() {
      stopped = true;
      offReconnect();
      endRead();
      await loop;
    },
    interrupt() {
      endRead();
    },
  };
}
