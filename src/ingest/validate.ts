import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { PassedFields } from '../bus/wire.js';
import type { EventErrorCode } from '../errors.js';
import { fail, ok, type Result } from '../result.js';
import { contentTypes, contextKeys, deviceTypes, eventLimits, knownTypes } from './taxonomy.js';

/** A valid event as the client sent it (before timestamps and enrichment). */
export interface ClientEvent extends PassedFields {
  event_type: string;
  event_id?: string;
  ts?: string;
}

export interface EventError {
  index: number;
  code: EventErrorCode;
  message: string;
}

const text = { type: 'string', maxLength: eventLimits.stringMax };
const id = { type: 'string', minLength: 1, maxLength: eventLimits.stringMax };

export const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})$/;

const baseProperties = {
  event_id: {
    type: 'string',
    pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
  },
  event_type: { type: 'string', pattern: '^[a-z][a-z0-9_.]{0,63}$' },
  ts: { type: 'string', maxLength: 40, pattern: isoTimestamp.source },
  anonymous_id: id,
  user_id: id,
  session_id: id,
  content_id: id,
  content_type: { type: 'string', enum: contentTypes },
  content_title: text,
  position_sec: { type: 'integer', minimum: 0, maximum: 2_147_483_647 },
  bitrate_kbps: { type: 'integer', minimum: 0, maximum: 10_000_000 },
  context: {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(
      contextKeys.map((k) => [k, k === 'device_type' ? { type: 'string', enum: deviceTypes } : text]),
    ),
  },
  properties: { type: 'object' },
};

function schemaFor(type: string | null): object {
  const req = type ? knownTypes[type] : undefined;
  const properties: Record<string, unknown> = { ...baseProperties };
  if (req?.properties) {
    const props: Record<string, unknown> = {};
    for (const p of req.properties) props[p] = p === 'amount_inr' ? { type: 'number', minimum: 0, maximum: 1e9 } : id;
    properties.properties = { type: 'object', required: [...req.properties], properties: props };
  }
  if (type === 'error') {
    properties.properties = {
      type: 'object',
      properties: { fatal: { type: 'boolean' }, code: { type: ['string', 'integer'], maxLength: 128 } },
    };
  }
  const schema: Record<string, unknown> = {
    type: 'object',
    additionalProperties: false,
    required: ['event_type', ...(req?.fields ?? []), ...(req?.properties ? ['properties'] : [])],
    properties,
  };
  if (req?.oneOf) schema.anyOf = req.oneOf.map((f) => ({ required: [f] }));
  return schema;
}

const ajv = new Ajv({ allErrors: false, strict: true, strictRequired: false, allowUnionTypes: true });
const validators = new Map<string, ValidateFunction<ClientEvent>>();
for (const type of Object.keys(knownTypes)) validators.set(type, ajv.compile<ClientEvent>(schemaFor(type)));
const customValidator = ajv.compile<ClientEvent>(schemaFor(null));

function describe(err: ErrorObject, type: string): { code: EventErrorCode; message: string } {
  const path = err.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const field = (name: string): string => (path ? `${path}.${name}` : name);
  switch (err.keyword) {
    case 'required':
      return {
        code: 'missing_field',
        message: `"${field(String(err.params.missingProperty))}" is required for ${type}`,
      };
    case 'anyOf':
      return { code: 'missing_field', message: `${type} needs "anonymous_id" or "user_id"` };
    case 'additionalProperties': {
      const name = field(String(err.params.additionalProperty));
      return {
        code: 'unknown_field',
        message: `unknown field "${name.slice(0, 64)}"; free-form data belongs in "properties"`,
      };
    }
    case 'maxLength':
      return { code: 'field_too_long', message: `"${path}" is longer than ${String(err.params.limit)} characters` };
    case 'pattern':
      if (path === 'ts')
        return {
          code: 'invalid_field',
          message: '"ts" must be an ISO 8601 timestamp with a time zone, e.g. 2026-11-21T10:00:00.000Z',
        };
      if (path === 'event_id') return { code: 'invalid_field', message: '"event_id" must be a UUID' };
      return { code: 'invalid_field', message: `"${path}" must match ${String(err.params.pattern)}` };
    case 'enum':
      return {
        code: 'invalid_field',
        message: `"${path}" must be one of ${(err.params.allowedValues as string[]).join(', ')}`,
      };
    default:
      return { code: 'invalid_field', message: `"${path || 'event'}" ${err.message ?? 'is invalid'}` };
  }
}

/**
 * Depth and serialized size of `properties`, without recursion (hostile nesting cannot overflow the stack).
 * The same walk adds up a bound on the UTF-8 size of `JSON.stringify(value)` (a string char takes at most 6 bytes,
 * as a `\uXXXX` escape; a number at most 32); only when the bound exceeds the limit is the value serialized to
 * measure it exactly, so the answer is always that of the exact measure.
 */
function propertiesTooLarge(value: unknown): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  let bound = 0;
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop() as number;
    if (depth > eventLimits.propertiesMaxDepth) return true;
    switch (typeof v) {
      case 'string':
        bound += 2 + 6 * v.length;
        break;
      case 'number':
        bound += 32;
        break;
      case 'boolean':
        bound += 5;
        break;
      case 'object':
        if (v === null) {
          bound += 4;
        } else if (Array.isArray(v)) {
          bound += 2 + v.length;
          for (const child of v as unknown[]) {
            values.push(child);
            depths.push(depth + 1);
          }
        } else {
          const keys = Object.keys(v);
          bound += 2 + keys.length;
          for (const k of keys) {
            bound += 3 + 6 * k.length;
            values.push((v as Record<string, unknown>)[k]);
            depths.push(depth + 1);
          }
        }
        break;
      default:
        bound = Infinity; // not a JSON value: measure exactly
    }
  }
  return (
    bound > eventLimits.propertiesMaxBytes && Buffer.byteLength(JSON.stringify(value)) > eventLimits.propertiesMaxBytes
  );
}

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function hasLoneSurrogate(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (loneSurrogate.test(v)) return true;
    } else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (loneSurrogate.test(k)) return true;
        stack.push(child);
      }
    }
  }
  return false;
}

/**
 * Check one event. `mayHaveSurrogates` is false when the raw body has no `\ud8..\udf` escape, which is the only
 * way JSON text can carry an unpaired surrogate: the common case skips the walk.
 */
export function validateEvent(
  value: unknown,
  index: number,
  mayHaveSurrogates: boolean,
): Result<ClientEvent, EventError> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return fail({ index, code: 'invalid_event', message: 'event must be a JSON object' });
  }
  const rawType = (value as { event_type?: unknown }).event_type;
  const type = typeof rawType === 'string' ? rawType : '';
  const validate = validators.get(type) ?? customValidator;
  if (!validate(value)) {
    // A failed anyOf (an identity: anonymous_id or user_id) comes after its branches' errors; it is the one that says
    // what the event needs, where the first branch's alone would claim anonymous_id is required.
    const errors = validate.errors as ErrorObject[];
    const last = errors[errors.length - 1];
    const err = last?.keyword === 'anyOf' ? last : (errors[0] as ErrorObject);
    return fail({ index, ...describe(err, type || 'an event') });
  }
  // The pattern admits impossible times (month 13, hour 99): refuse what does not parse, as `sent_at` is refused.
  if (value.ts !== undefined && Number.isNaN(Date.parse(value.ts))) {
    return fail({
      index,
      code: 'invalid_field',
      message: '"ts" must be an ISO 8601 timestamp with a time zone, e.g. 2026-11-21T10:00:00.000Z',
    });
  }
  if (value.properties !== undefined && propertiesTooLarge(value.properties)) {
    return fail({
      index,
      code: 'properties_too_large',
      message: `"properties" exceeds ${eventLimits.propertiesMaxBytes} bytes serialized or ${eventLimits.propertiesMaxDepth} levels of nesting`,
    });
  }
  if (mayHaveSurrogates && hasLoneSurrogate(value)) {
    return fail({ index, code: 'invalid_field', message: 'a string contains an unpaired UTF-16 surrogate' });
  }
  return ok(value);
}

export const surrogateEscape = /\\u[dD][89a-fA-F]/;
