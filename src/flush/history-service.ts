import type { Subscription } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { WireEvent } from '../bus/wire.js';
import type { Logger } from '../log.js';
import type { HistoryAnswer, HistoryRequest } from '../contracts/history.js';
import { sessionHistory } from '../store/events.js';
import type { Store } from '../store/store.js';

/** Rows read per page; the page is cut shorter where its JSON would not fit a NATS message. */
const pageRows = 5000;

/**
 * Aggregators hold no store: when a late event comes for a session no longer in memory, its shard asks here for the
 * session's stored events (src/aggregate/recall.ts). Served by the flush role, which holds the store; any flush
 * process answers (queue group). Requests are answered concurrently: each is one read.
 *
 * Only once the store holds the shard's output through the request's `stored_through`: an answer from a store behind
 * it (a flush role back after an outage, its backlog not yet written) would miss the session's last events, and the
 * shard would count the session afresh. Until then the answer is an error, and the shard asks again.
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
        let answer: string;
        try {
          const { stored_through: through, ...req } = JSON.parse(new TextDecoder().decode(msg.data)) as HistoryRequest;
          await storedThrough(bus, through);
          answer = page(await sessionHistory(store.client, req, pageRows), req.offset, maxBytes);
        } catch (e) {
          hlog.warn({ err: (e as Error).message }, 'history request failed');
          answer = JSON.stringify({ error: (e as Error).message } satisfies HistoryAnswer);
        }
        msg.respond(new TextEncoder().encode(answer));
      })();
    },
  });
}

/** Throws unless the live flush consumer (the tier that writes `events`) has acknowledged the raw stream through `seq`. */
async function storedThrough(bus: Bus, seq: number): Promise<void> {
  if (!Number.isSafeInteger(seq) || seq < 0)
    throw new Error(`stored_through must be a raw-stream sequence, not ${seq}`);
  if (seq === 0) return;
  const floor = (await bus.jsm.consumers.info(bus.names.rawStream, bus.names.flushConsumer)).ack_floor.stream_seq;
  if (floor < seq)
    throw new Error(`the store holds the raw stream through ${floor}, not yet ${seq}: its flush is behind`);
}

/** A `HistoryAnswer` in JSON: the events that fit `maxBytes` (at least one), and the offset of the first left out. */
function page(events: readonly WireEvent[], offset: number, maxBytes: number): string {
  const parts: string[] = [];
  let bytes = 64;
  for (const e of events) {
    const json = JSON.stringify(e);
    bytes += Buffer.byteLength(json) + 1;
    if (bytes > maxBytes && parts.length > 0) break;
    parts.push(json);
  }
  const more = parts.length < events.length || events.length === pageRows;
  return `{"events":[${parts.join(',')}],"next":${more ? offset + parts.length : null}}`;
}
