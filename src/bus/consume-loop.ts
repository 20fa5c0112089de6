import type { Consumer, ConsumerMessages, JsMsg } from 'nats';
import type { Logger } from '../log.js';

export interface ConsumeLoopOptions {
  /** Open the consumer to read; called again after a failure, so it decides where reading resumes. */
  open(): Promise<Consumer>;
  /** Messages fetched ahead of `handle`. */
  readAhead: number;
  /** One message at a time, in delivery order; a throw ends this read and opens a new one. */
  handle(m: JsMsg): Promise<void>;
  log: Logger;
  /** What a failure means, for the log. */
  onFailure: string;
}

export interface ConsumeLoop {
  /** Stop reading and wait for the message under way. */
  stop(): Promise<void>;
}

/** The read loop every JetStream reader here shares: message by message, reopened after a failure, stoppable. */
export function consumeLoop(options: ConsumeLoopOptions): ConsumeLoop {
  let stopped = false;
  let messages: ConsumerMessages | undefined;
  const run = async (): Promise<void> => {
    while (!stopped) {
      try {
        messages = await (await options.open()).consume({ max_messages: options.readAhead });
        for await (const m of messages) {
          await options.handle(m);
          if (stopped) break;
        }
      } catch (err) {
        if (stopped) break;
        options.log.warn({ err: (err as Error).message }, options.onFailure);
        // Give up the old read's pull requests before opening another.
        messages?.stop();
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  };
  const loop = run();
  return {
    async stop() {
      stopped = true;
      messages?.stop();
      await loop;
    },
  };
}
