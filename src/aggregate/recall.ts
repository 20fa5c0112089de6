import type { Bus } from '../bus/bus.js';
import type { WireEvent } from '../bus/wire.js';
import type { HistoryAnswer, HistoryRequest } from '../contracts/history.js';
import type { Logger } from '../log.js';

/** How long one page may take to come back; a store busy with a large insert can hold a read for seconds. */
const requestTimeoutMs = 30_000;

/**
 * The stored session events a shard had read before one of its input messages, asked of the flush role, page by page.
 * Asked again until answered (after 1 s, 2 s, ... up to 10 s): a shard that went on without them would count the
 * session afresh, and its answers would stay wrong until a `darshak replay`. While no flush process answers, the shard
 * waits, and says so in its log. `stopping` ends the wait with an error.
 */
export async function recallSessions(
  bus: Bus,
  req: Omit<HistoryRequest, 'offset'>,
  stopping: () => boolean,
  log: Logger,
): Promise<WireEvent[]> {
  const events: WireEvent[] = [];
  let offset: number | null = 0;
  for (let attempt = 0; offset !== null;) {
    if (stopping()) throw new Error('stopping while recalling stored sessions');
    try {
      const reply = await bus.nc.request(
        bus.names.historySubject,
        new TextEncoder().encode(JSON.stringify({ ...req, offset })),
        { timeout: requestTimeoutMs },
      );
      const answer = JSON.parse(new TextDecoder().decode(reply.data)) as HistoryAnswer;
      if ('error' in answer) throw new Error(answer.error);
      for (const e of answer.events) events.push(e);
      offset = answer.next;
      attempt = 0;
    } catch (err) {
      attempt++;
      log.warn(
        { err: (err as Error).message, tenant: req.tenant, sessions: req.sessions.length, attempt },
        'stored sessions not recalled; asking again',
      );
      await new Promise((r) => setTimeout(r, Math.min(1000 * attempt, 10_000)));
    }
  }
  return events;
}
