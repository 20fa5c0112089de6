import type { RequestErrorCode } from '../errors.js';
import { fail, ok, type Result } from '../result.js';
import { eventLimits } from './taxonomy.js';
import { isoTimestamp, surrogateEscape, type EventError } from './validate.js';

// The steps of reading a batch of events, before any event is judged on its own (validate.ts).

/** Why a request is refused: an error code of the registry, and what to tell the client beyond its message. */
export interface Refusal {
  code: RequestErrorCode;
  message?: string;
  details?: unknown[];
}
/** Each step answers its value or a refusal; `Ingest.run` is the one place that turns a refusal into an answer. */
export type Step<T> = Result<T, Refusal>;

export const reject = (code: RequestErrorCode, message?: string, details?: unknown[]): Step<never> =>
  fail({ code, message, details });

export type AnswerError = EventError | { index: number; code: 'ingest_degraded'; message: string };
/** A CMCD answer names the report's line (from 1), not an index. */
export type LineError = Omit<AnswerError, 'index'> & { line: number };

export interface Batch {
  events: unknown[];
  sentAt: number | null;
  mayHaveSurrogates: boolean;
  /** CMCD: the line of each event, the lines that failed before becoming events, and the reports ignored. */
  cmcd?: { lines: number[]; errors: LineError[]; reports: number; ignored: number };
}

export const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** A JSON body of `{events, sent_at?}`: UTF-8, JSON, then its shape. */
export function parseBatch(bytes: Uint8Array): Step<Batch> {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return reject('invalid_json', 'Request body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return reject('invalid_json', `Request body is not valid JSON: ${(err as Error).message.slice(0, 200)}`);
  }
  return shapeBatch(value, surrogateEscape.test(text));
}

/** Exactly `events` (1 to the batch maximum) and an optional ISO `sent_at`; the events themselves are judged later. */
export function shapeBatch(value: unknown, mayHaveSurrogates: boolean): Step<Batch> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return reject('invalid_body');
  const body = value as Record<string, unknown>;
  for (const k of Object.keys(body)) {
    if (k !== 'events' && k !== 'sent_at')
      return reject(
        'invalid_body',
        `Unknown top-level field ${JSON.stringify(k.slice(0, 64))}; a batch has "events" and optional "sent_at"`,
      );
  }
  if (!Array.isArray(body.events)) return reject('invalid_body');
  if (body.events.length === 0) return reject('invalid_body', '"events" is empty');
  if (body.events.length > eventLimits.batchMax)
    return reject(
      'too_many_events',
      `A batch holds at most ${eventLimits.batchMax} events; this one has ${body.events.length}`,
    );
  let sentAt: number | null = null;
  if (body.sent_at !== undefined) {
    const parsed = typeof body.sent_at === 'string' && isoTimestamp.test(body.sent_at) ? Date.parse(body.sent_at) : NaN;
    if (Number.isNaN(parsed)) return reject('invalid_body', '"sent_at" must be an ISO 8601 timestamp with a time zone');
    sentAt = parsed;
  }
  return ok({ events: body.events, sentAt, mayHaveSurrogates });
}
