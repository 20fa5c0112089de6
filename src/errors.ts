// The one registry of error codes: every HTTP error answer and every per-event error takes its code, status and
// default message from here. docs/errors.md lists the same table; test/unit/docs.test.ts keeps the two equal.

export interface ErrorSpec {
  /** HTTP status of a request-level answer; null for codes that only appear per event inside `errors`. */
  status: number | null;
  message: string;
}

export const errorRegistry = {
  // Request-level, any listener
  not_found: { status: 404, message: 'No such endpoint' },
  method_not_allowed: { status: 405, message: 'Method not allowed on this endpoint' },
  payload_too_large: { status: 413, message: 'Request body too large: at most 1 MiB at ingest, 64 KiB at the API' },
  internal_error: { status: 500, message: 'Internal error; the request id identifies it in the logs' },
  not_ready: { status: 503, message: 'A connection this process needs is down' },
  shutting_down: { status: 503, message: 'This process is stopping and took no action; send the request again' },
  // Control plane (CLI and the admin API)
  invalid_request: { status: 400, message: 'A parameter is missing or invalid' },
  already_exists: { status: 409, message: 'A resource with this identifier already exists' },
  limit_reached: {
    status: 403,
    message: 'The tenant holds as many of these as its plan allows; revoke or delete one first',
  },
  // Auth and the API at {base_url}
  invalid_credentials: { status: 401, message: 'E-mail or password is wrong' },
  too_many_attempts: {
    status: 429,
    message: 'Too many failed logins; retry after the number of seconds in Retry-After',
  },
  unauthorized: {
    status: 401,
    message: 'Bearer token missing, malformed, expired, revoked or not signed by this service',
  },
  insufficient_scope: { status: 403, message: 'The token lacks the scope this endpoint needs' },
  invalid_parameter: { status: 400, message: 'A query parameter is unknown, repeated or has a bad value' },
  plan_required: { status: 403, message: 'This feature needs a higher plan (exports: enterprise)' },
  too_many_exports: {
    status: 429,
    message: 'Two exports of this tenant are already pending; retry when one is finished',
  },
  invalid_signature: {
    status: 403,
    message: 'The download link is tampered with or expired; ask GET /v1/analytics/export/{id} for a new one',
  },
  // Ingest
  invalid_json: { status: 400, message: 'Request body is not valid UTF-8 JSON' },
  invalid_body: { status: 400, message: 'Request body must be an object with an "events" array' },
  too_many_events: { status: 400, message: 'A batch holds at most 500 events' },
  validation_failed: { status: 400, message: 'No event of the batch is valid' },
  invalid_api_key: { status: 401, message: 'API key missing, unknown or revoked' },
  api_key_gone: {
    status: 410,
    message: 'API key missing, unknown or revoked; a CMCD reporter stops sending to this target for the session',
  },
  unsupported_media_type: {
    status: 415,
    message: 'CMCD reports are sent as application/cmcd, text/plain or a JSON array (application/json)',
  },
  tenant_inactive: { status: 403, message: 'The tenant of this key is inactive' },
  quota_exceeded: { status: 403, message: 'The monthly event quota of this tenant is used up' },
  rate_limited: { status: 429, message: 'Rate limit reached; retry after the number of seconds in Retry-After' },
  ingest_degraded: { status: 503, message: 'The event bus did not acknowledge; nothing was accepted, retry later' },
  ingest_overloaded: {
    status: 503,
    message: 'The pipeline is behind; nothing was accepted, retry after the number of seconds in Retry-After',
  },
  // Per event, inside `errors` of an ingest answer
  invalid_event: { status: null, message: 'Event must be a JSON object' },
  missing_field: { status: null, message: 'A required field is missing' },
  unknown_field: { status: null, message: 'Unknown field; free-form data belongs in "properties"' },
  invalid_field: { status: null, message: 'A field has the wrong type or format' },
  field_too_long: { status: null, message: 'A string field exceeds 512 characters' },
  properties_too_large: { status: null, message: '"properties" exceeds 8 KiB serialized or 16 levels of nesting' },
  invalid_report: { status: null, message: 'A CMCD report line does not decode, or lacks a key event mode requires' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorRegistry;
export type RequestErrorCode = {
  [K in ErrorCode]: (typeof errorRegistry)[K]['status'] extends number ? K : never;
}[ErrorCode];
export type EventErrorCode = Exclude<ErrorCode, RequestErrorCode>;

export interface ErrorBody {
  error: { code: string; message: string; request_id: string; details?: unknown[] };
}

export function errorStatus(code: RequestErrorCode): number {
  return errorRegistry[code].status;
}

export function errorBody(code: ErrorCode, requestId: string, message?: string, details?: unknown[]): ErrorBody {
  const body: ErrorBody = { error: { code, message: message ?? errorRegistry[code].message, request_id: requestId } };
  if (details !== undefined) body.error.details = details;
  return body;
}
