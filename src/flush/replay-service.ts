import type { Subscription } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/store.js';
import { replayRange, type ReplayRequest, type ReplayResult } from './replay.js';

/** The answer to a replay request: the result, or why it failed. */
export type ReplayAnswer = { result: ReplayResult } | { error: string };

/**
 * `darshak replay` asks the flush role over NATS, because with embedded ClickHouse the flush process holds the store
 * and no other process can open it. One replay at a time per process (queue group: one flush process takes each).
 */
export function serveReplay(bus: Bus, store: Store, log: Logger): Subscription {
  const rlog = log.child({ module: 'replay' });
  let queue: Promise<void> = Promise.resolve();
  return bus.nc.subscribe(bus.names.replaySubject, {
    queue: 'flush',
    callback: (err, msg) => {
      if (err) return;
      queue = queue.then(async () => {
        let answer: ReplayAnswer;
        try {
          const req = JSON.parse(new TextDecoder().decode(msg.data)) as ReplayRequest;
          const result = await replayRange(store.client, req);
          rlog.info(result, 'replayed');
          answer = { result };
        } catch (e) {
          rlog.warn({ err: (e as Error).message }, 'replay failed');
          answer = { error: (e as Error).message };
        }
        msg.respond(new TextEncoder().encode(JSON.stringify(answer)));
      });
    },
  });
}
