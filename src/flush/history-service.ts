import type { Subscription } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { WireEvent } from '../bus/wire.js';
import type { Logger } from '../log.js';
import { sessionHistory, type HistoryRequest } from '../store/events.js';
import type { Store } from '../store/store.js';

/** One page of an answer: events from the request's offset, and where the next page starts (null: no more). */
export type HistoryAnswer = { events: WireEvent[]; next: number | null } | { error: string };

/** Rows read per page; the page is cut shorter where its JSON would not fit a NATS message. */
const pageRows = 5000;

/**
 * Aggregators hold no store: when a late event comes for a session no longer in memory, its shard asks here for the
 * session's stored events (src/aggregate/recall.ts). Served by the flush role, which holds the store; any flush
 * process answers (queue group). Requests are answered concurrently: each is one read.
 */
export function serveHistory(bus: Bus, store: Store, log: Logger): Subscription {
  const hlog = log.child({ module: 'history' });
  // Room for the reply's framing under the server's limit.
  const maxBytes = (bus.nc.info?.max_payload ?? 1_048_576) - 4096;
  return bus.nc.subscribe(bus.names.historySubject, {
    queue: 'flush',
    callback: (err, msg) => {
      if (err) return;
      void (async () => {
        let answer: HistoryAnswer;
        try {
          const req = JSON.parse(new TextDecoder().decode(msg.data)) as HistoryRequest;
          const events = await sessionHistory(store.client, req, pageRows);
          answer = page(events, req.offset, maxBytes);
        } catch (e) {
          hlog.warn({ err: (e as Error).message }, 'history request failed');
          answer = { error: (e as Error).message };
        }
        msg.respond(new TextEncoder().encode(JSON.stringify(answer)));
      })();
    },
  });
}

/** The events that fit `maxBytes` as JSON (at least one), and the offset of the first left out. */
function page(events: WireEvent[], offset: number, maxBytes: number): HistoryAnswer {
  let bytes = 64;
  let n = 0;
  for (; n < events.length; n++) {
    bytes += Buffer.byteLength(JSON.stringify(events[n])) + 1;
    if (bytes > maxBytes && n > 0) break;
  }
  const more = n < events.length || events.length === pageRows;
  return { events: n < events.length ? events.slice(0, n) : events, next: more ? offset + n : null };
}
