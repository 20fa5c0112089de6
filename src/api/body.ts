import { ControlError } from '../control/kv-records.js';
import { replyError } from '../http/server.js';
import type { HttpReply, HttpRequest } from '../http/types.js';
import { fail, ok, type Result } from '../result.js';
import type { Paged } from '../store/queries/answers.js';

export type BodyField = 'string' | 'string[]' | 'boolean' | 'object';
type FieldValue<F extends BodyField> = F extends 'string'
  ? string
  : F extends 'boolean'
    ? boolean
    : F extends 'object'
      ? Record<string, unknown>
      : string[];
type Spec = Record<string, { type: BodyField; required: boolean }>;
export type BodyOf<S extends Spec> = {
  [K in keyof S]: S[K]['required'] extends true ? FieldValue<S[K]['type']> : FieldValue<S[K]['type']> | undefined;
};

const fatal = new TextDecoder('utf-8', { fatal: true });

function typeOk(value: unknown, type: BodyField): boolean {
  if (type === 'string') return typeof value === 'string';
  if (type === 'boolean') return typeof value === 'boolean';
  if (type === 'object') return typeof value === 'object' && value !== null && !Array.isArray(value);
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

/** A JSON object body with exactly the declared fields, or the 400/413 answer that says what is wrong. */
export async function readJson<S extends Spec>(req: HttpRequest, spec: S): Promise<Result<BodyOf<S>, HttpReply>> {
  const body = await req.body();
  if (!body.ok) return fail({ ...replyError(req, 'payload_too_large'), close: true });
  let parsed: unknown;
  try {
    parsed = JSON.parse(fatal.decode(body.value));
  } catch {
    return fail(replyError(req, 'invalid_json'));
  }
  const bad = (message: string, field?: string): { ok: false; error: HttpReply } =>
    fail(replyError(req, 'invalid_request', message, field === undefined ? undefined : [{ field }]));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return bad('body must be a JSON object');
  const record = parsed as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!Object.hasOwn(spec, key)) {
      const shown = key.length > 64 ? `${key.slice(0, 64)}…` : key;
      return bad(`unknown field ${JSON.stringify(shown)}; allowed: ${Object.keys(spec).join(', ')}`, shown);
    }
  }
  for (const [key, field] of Object.entries(spec)) {
    const value = record[key];
    if (value === undefined) {
      if (field.required) return bad(`${key} is required`, key);
      continue;
    }
    if (!typeOk(value, field.type))
      return bad(
        `${key} must be ${field.type === 'string[]' ? 'an array of strings' : field.type === 'object' ? 'an object' : `a ${field.type}`}`,
        key,
      );
  }
  return ok(record as BodyOf<S>);
}

/** Control-plane refusals (not found, exists, invalid) as answers; anything else is a real failure. */
export async function controlReply(req: HttpRequest, action: () => Promise<HttpReply>): Promise<HttpReply> {
  try {
    return await action();
  } catch (err) {
    if (err instanceof ControlError) return replyError(req, err.code, err.message);
    throw err;
  }
}

/** A page of a full list, with the count before paging (every list answer carries X-Total-Count). */
export function page<T>(items: readonly T[], limit = items.length, offset = 0): HttpReply {
  return pageReply({ items: items.slice(offset, offset + limit), total: items.length });
}

/** A page a query cut itself (it reads less for it), with the length of the whole list. */
export function pageReply<T>(paged: Paged<T>): HttpReply {
  return { status: 200, headers: { 'X-Total-Count': String(paged.total) }, body: paged.items };
}
