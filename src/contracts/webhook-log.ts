import type { Bus } from '../bus/bus.js';
import type { AttemptLog } from './webhook-attempt.js';
import { logPerEndpoint } from './webhook-streams.js';

export type { AttemptLog };

const decoder = new TextDecoder();

/** The entry's id as message id: an entry written again (after its process died) is kept once within the log's duplicate window. */
export async function appendLog(bus: Bus, endpointId: string, entry: AttemptLog): Promise<void> {
  await bus.js.publish(bus.names.webhookLogSubject(endpointId), JSON.stringify(entry), { msgID: entry.id });
}

/** An endpoint's logged attempts, newest first (at most 200: the stream keeps that many per endpoint). */
export async function readLog(bus: Bus, endpointId: string): Promise<AttemptLog[]> {
  const stream = bus.names.webhookLogStream;
  const subject = bus.names.webhookLogSubject(endpointId);
  let last: number;
  try {
    last = (await bus.jsm.streams.getMessage(stream, { last_by_subj: subject })).seq;
  } catch {
    return [];
  }
  const out: AttemptLog[] = [];
  const consumer = await bus.reader(stream, subject, 'all');
  let seen = 0;
  // Bounded: the log holds at most 200 per subject, and each fetch ends after its expiry.
  for (let round = 0; round < 5 && seen < last; round++) {
    const batch = await consumer.fetch({ max_messages: logPerEndpoint + 10, expires: 2000 });
    for await (const m of batch) {
      out.push(JSON.parse(decoder.decode(m.data)) as AttemptLog);
      seen = m.seq;
      if (seen >= last) break;
    }
    batch.stop();
  }
  await consumer.delete().catch(() => undefined);
  return out.reverse();
}

export async function purgeLog(bus: Bus, endpointId: string): Promise<void> {
  await bus.jsm.streams
    .purge(bus.names.webhookLogStream, { filter: bus.names.webhookLogSubject(endpointId) })
    .catch(() => undefined);
}
