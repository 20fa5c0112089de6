import t from 'tap';
import { LiveFeed } from '../../src/api/live.js';
import { dashboard } from '../../src/api/dashboard.js';
import { createLogger } from '../../src/log.js';
import { apiRoutes, type ApiRouteDeps } from '../../src/api/role.js';
import { errorRegistry, type ErrorSpec } from '../../src/errors.js';
import { opsRoutes } from '../../src/http/ops.js';
import type { Ingest } from '../../src/ingest/ingest.js';
import { ingestRoutes } from '../../src/ingest/routes.js';
import { endpoints } from '../../pipelines/endpoints.js';
import { answerSchemas } from '../../src/store/queries/answers.js';
import {
  compileEverything,
  listPathItem,
  deref,
  isReference,
  openapiDocument as doc,
  operations,
  resolvePointer,
  undocumentedRoutes,
  validateAnswer,
  validateComponent,
  type HeaderObject,
  type JsonSchema,
  type ResponseObject,
} from '../helpers/openapi.js';

/** Every `$ref` string anywhere in the document. */
function refsIn(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const v of node) refsIn(v, out);
  else if (typeof node === 'object' && node !== null) {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsIn(v, out);
    }
  }
  return out;
}

/** Call `visit` on every object in the document that has a `type` or `required` (a schema, for our purposes). */
function walkSchemas(node: unknown, at: string, visit: (schema: Record<string, unknown>, at: string) => void): void {
  if (Array.isArray(node)) node.forEach((v, i) => walkSchemas(v, `${at}/${i}`, visit));
  else if (typeof node === 'object' && node !== null) {
    const o = node as Record<string, unknown>;
    if ('type' in o || 'required' in o) visit(o, at);
    for (const [k, v] of Object.entries(o)) walkSchemas(v, `${at}/${k}`, visit);
  }
}

interface DocumentedResponse {
  where: string;
  path: string;
  status: string;
  response: ResponseObject;
  /** The operation takes a JWT. */
  jwt: boolean;
}

function responsesOf(): DocumentedResponse[] {
  return operations().flatMap(({ path, method, operation }) =>
    Object.entries(operation.responses).map(([status, r]) => ({
      where: `${method.toUpperCase()} ${path} ${status}`,
      path,
      status,
      response: deref<ResponseObject>(r),
      jwt: (operation.security ?? []).some((s) => 'bearerJwt' in s),
    })),
  );
}

/** The body is Error, or Error narrowed by an allOf. */
function usesErrorSchema(response: ResponseObject): boolean {
  const schema = response.content?.['application/json']?.schema;
  const isError = (s: unknown): boolean => isReference(s) && s.$ref === '#/components/schemas/Error';
  return isError(schema) || (typeof schema === 'object' && Array.isArray(schema.allOf) && schema.allOf.some(isError));
}

function isRequiredHeader(response: ResponseObject, name: string): boolean {
  const raw = response.headers?.[name];
  return raw !== undefined && deref<HeaderObject>(raw).required === true;
}

t.test('the document is well-formed', async (t) => {
  t.equal(doc.openapi, '3.1.0');
  t.strictSame(
    doc.servers?.map((s) => s.url),
    ['{base_url}', '{ingest_url}'],
  );
  const unresolved = refsIn(doc).filter((ref) => resolvePointer(ref) === undefined);
  t.strictSame(unresolved, [], 'every $ref resolves');
  const ids = operations().map((o) => o.operation.operationId);
  t.notOk(ids.includes(undefined), 'every operation has an operationId');
  t.strictSame(
    ids.filter((id, i) => ids.indexOf(id) !== i),
    [],
    'operationIds are unique',
  );
  const undescribed = responsesOf()
    .filter((r) => !r.response.description)
    .map((r) => r.where);
  t.strictSame(undescribed, [], 'every response has a description');
  for (const { path, method, operation } of operations()) {
    const declared = [...(doc.paths[path]?.parameters ?? []), ...(operation.parameters ?? [])]
      .map((p) => deref<{ name: string; in: string }>(p as { name: string; in: string }))
      .filter((p) => p.in === 'path')
      .map((p) => p.name);
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    t.strictSame(declared.sort(), templated.sort(), `${method} ${path}: path parameters declared`);
  }
  t.strictSame(compileEverything(), [], 'Ajv (strict) compiles every schema');
  const unsatisfiable: string[] = [];
  walkSchemas(doc, '#', (schema, at) => {
    if (schema.additionalProperties !== false || !Array.isArray(schema.required)) return;
    const defined = Object.keys((schema.properties as Record<string, unknown> | undefined) ?? {});
    for (const name of schema.required as string[]) if (!defined.includes(name)) unsatisfiable.push(`${at}: ${name}`);
  });
  t.strictSame(unsatisfiable, [], 'a closed object requires only properties it defines');
});

t.test('the invariants every answer keeps are written into the document', async (t) => {
  const problems: string[] = [];
  for (const { where, status, response, path, jwt } of responsesOf()) {
    const ingest = path.startsWith('/v1/ingest/');
    const live = path === '/v1/live';
    if (!isRequiredHeader(response, 'X-Request-Id')) problems.push(`${where}: X-Request-Id`);
    if (status === '429' && !isRequiredHeader(response, 'Retry-After')) problems.push(`${where}: Retry-After`);
    const schema = response.content?.['application/json']?.schema;
    if (
      status.startsWith('2') &&
      typeof schema === 'object' &&
      schema.type === 'array' &&
      !isRequiredHeader(response, 'X-Total-Count')
    ) {
      problems.push(`${where}: X-Total-Count on a list`);
    }
    // Ingest: every answer. Behind a JWT: every answer once the token verified (not 401, nor the dispatcher's 500/503).
    const counted = ingest || (jwt && !live && !['401', '500', '503'].includes(status));
    for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
      if (counted && !isRequiredHeader(response, h)) problems.push(`${where}: ${h}`);
    }
    if (Number(status) >= 400 && !usesErrorSchema(response)) problems.push(`${where}: the Error schema`);
  }
  t.strictSame(problems, []);
  // Each path names the listener that serves it; /healthz, /readyz and /metrics inherit both.
  for (const [path, item] of Object.entries(doc.paths)) {
    const expected = ['/healthz', '/readyz', '/metrics'].includes(path)
      ? undefined
      : path.startsWith('/v1/ingest/') || path.startsWith('/sdk/')
        ? ['{ingest_url}']
        : ['{base_url}'];
    t.strictSame(
      (item.servers as Array<{ url: string }> | undefined)?.map((s) => s.url),
      expected,
      `${path} servers`,
    );
  }
});

t.test('the Error code enum is exactly the registry of src/errors.ts', async (t) => {
  const errorSchema = doc.components.schemas.Error as { properties: { error: { properties: { code: JsonSchema } } } };
  const code = deref<{ enum: string[] }>(errorSchema.properties.error.properties.code as { enum: string[] });
  t.strictSame([...code.enum].sort(), Object.keys(errorRegistry).sort());
  t.equal(new Set(code.enum).size, code.enum.length, 'no code twice');
});

t.test('each error answer names only codes of its own status', async (t) => {
  const registry: Record<string, ErrorSpec> = errorRegistry;
  const problems: string[] = [];
  const check = (where: string, status: string, response: ResponseObject): void => {
    const schema = response.content?.['application/json']?.schema as
      { allOf?: Array<{ properties?: { error?: { properties?: { code?: { enum?: string[] } } } } }> } | undefined;
    const codes = schema?.allOf?.flatMap((s) => s.properties?.error?.properties?.code?.enum ?? []) ?? [];
    if (Number(status) >= 400 && codes.length === 0) problems.push(`${where}: no codes named`);
    for (const c of codes) {
      if (registry[c]?.status !== Number(status))
        problems.push(`${where}: ${c} is ${String(registry[c]?.status)} in the registry`);
    }
  };
  for (const { where, status, response } of responsesOf()) check(where, status, response);
  const methodNotAllowed = doc.components.responses?.MethodNotAllowed;
  t.ok(methodNotAllowed, 'the 405 answer is described');
  if (methodNotAllowed) check('components/responses/MethodNotAllowed', '405', methodNotAllowed);
  t.strictSame(problems, []);
});

t.test('every route of the api listener is documented', async (t) => {
  // As for ingest below: the factories only close over their dependencies, so placeholders do for reading routes.
  const routes = [
    ...apiRoutes({
      live: new LiveFeed(...([] as unknown as ConstructorParameters<typeof LiveFeed>)),
    } as unknown as ApiRouteDeps),
    ...dashboard(createLogger('silent')).routes,
  ];
  t.ok(routes.length >= 15);
  t.strictSame(undocumentedRoutes(routes), []);
});

/** A schema as the document writes it: a part that is itself one of `named` becomes a `$ref` to it. */
function asDocumented(schema: unknown, named: ReadonlyMap<unknown, string>, top = true): unknown {
  if (!top && named.has(schema)) return { $ref: `#/components/schemas/${named.get(schema)}` };
  if (Array.isArray(schema)) return schema.map((v) => asDocumented(v, named, false));
  if (typeof schema !== 'object' || schema === null) return schema;
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, asDocumented(v, named, false)]));
}

t.test('every analytics answer is documented as its schema in the code says', async (t) => {
  t.ok(endpoints.length >= 2);
  for (const e of endpoints) {
    const item = listPathItem(e);
    t.strictSame(doc.paths[e.path], item, `${e.path}: docs/openapi.json has ${JSON.stringify(item)}`);
  }
  const schemas: Array<[string, object]> = [
    ...Object.entries(answerSchemas),
    ...endpoints.map((e): [string, object] => [e.itemName, e.schema]),
  ];
  const named = new Map<unknown, string>(schemas.map(([name, schema]) => [schema, name]));
  for (const [name, schema] of schemas) {
    const want = asDocumented(schema, named);
    t.strictSame(doc.components.schemas[name], want, `${name}: docs/openapi.json has ${JSON.stringify(want)}`);
  }
});

t.test('every route of the ingest listener is documented', async (t) => {
  // Only `.method` and `.path` are read: the handlers, which would need a real Ingest, are never called.
  const routes = [...ingestRoutes({} as unknown as Ingest), ...opsRoutes(() => [], '')];
  t.ok(routes.length >= 5);
  t.strictSame(undocumentedRoutes(routes), []);
  t.strictSame(
    undocumentedRoutes([
      { method: 'GET', path: '/v1/nowhere' },
      { method: 'PATCH', path: '/healthz' },
    ]),
    ['GET /v1/nowhere', 'PATCH /healthz'],
    'and it notices what is not',
  );
});

const requestId = '4f1c2b7e-0d3a-4c55-9d9e-1f6f1c0a2b3c';
const json = (extra: Record<string, string> = {}): Headers =>
  new Headers({ 'X-Request-Id': requestId, 'Content-Type': 'application/json; charset=utf-8', ...extra });
const rate = { 'RateLimit-Limit': '120000', 'RateLimit-Remaining': '119990', 'RateLimit-Reset': '42' };
const keyRow = {
  id: 'key_0123456789abcdef0123',
  name: 'web',
  environment: 'production',
  scope: 'ingest:write',
  prefix: 'dk_live_AbC9',
  created_at: '2026-11-21T10:00:00.000Z',
  last_used_at: null,
  revoked_at: null,
};
const alert = {
  id: 7,
  severity: 'critical',
  source: 'qos',
  category: 'qos.rebuffer_spike',
  title: 'Rebuffering spike in Maharashtra',
  description: 'Rebuffer rate 9.1 % against a baseline of 2.0 %',
  data: {
    severity: 'critical',
    region: 'Maharashtra',
    current_rate: 9.1,
    baseline_rate: 2,
    affected_sessions: 40,
    pop: 'bom1',
  },
  acknowledged: false,
  acknowledged_at: null,
  created_at: '2026-11-21T10:00:00Z',
  resolved_at: null,
};

t.test('validateAnswer accepts answers that fit', async (t) => {
  t.strictSame(
    validateAnswer('GET', 'http://127.0.0.1:8080/v1/api-keys', 200, json({ ...rate, 'X-Total-Count': '1' }), [keyRow]),
    [],
  );
  t.strictSame(
    validateAnswer('GET', '/v1/analytics/alerts?limit=5', 200, json({ ...rate, 'X-Total-Count': '1' }), [alert]),
    [],
  );
  t.strictSame(
    validateAnswer('POST', '/v1/alerts/7/acknowledge', 200, json(rate), {
      ...alert,
      acknowledged: true,
      acknowledged_at: '2026-11-21T10:05:00Z',
    }),
    [],
  );
  t.strictSame(
    validateAnswer('DELETE', '/v1/api-keys/key_0123456789abcdef0123', 200, json(rate), {
      id: keyRow.id,
      revoked_at: '2026-11-21T10:00:00Z',
    }),
    [],
  );
  t.strictSame(
    validateAnswer('POST', '/v1/ingest/events?server_ts=1', 200, json(rate), {
      accepted: 2,
      rejected: 1,
      queued: true,
      errors: [{ index: 1, code: 'missing_field', message: '"session_id" is required for heartbeat' }],
    }),
    [],
  );
  t.strictSame(
    validateAnswer('POST', '/v1/ingest/beacon?api_key=k', 200, json(rate), {
      accepted: 0,
      rejected: 0,
      queued: false,
      errors: [{ code: 'invalid_api_key', message: 'API key missing, unknown or revoked' }],
      request_id: requestId,
    }),
    [],
  );
  t.strictSame(
    validateAnswer('POST', '/v1/ingest/events', 429, json({ ...rate, 'Retry-After': '42' }), {
      error: { code: 'rate_limited', message: 'm', request_id: requestId },
    }),
    [],
  );
  t.strictSame(
    validateAnswer('GET', '/readyz', 503, json(), {
      error: {
        code: 'not_ready',
        message: 'Not ready: nats down',
        request_id: requestId,
        details: [{ check: 'nats' }],
      },
    }),
    [],
  );
  t.strictSame(
    validateAnswer(
      'GET',
      '/metrics',
      200,
      new Headers({ 'x-request-id': requestId, 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }),
      '# HELP x\n',
    ),
    [],
  );
  t.strictSame(
    validateAnswer(
      'HEAD',
      '/healthz',
      200,
      new Headers({ 'x-request-id': requestId, 'content-type': 'application/json' }),
      undefined,
    ),
    [],
    'HEAD is GET without a body',
  );
  t.strictSame(
    validateAnswer('PUT', '/v1/api-keys', 405, json({ Allow: 'POST, GET, DELETE' }), {
      error: { code: 'method_not_allowed', message: 'm', request_id: requestId },
    }),
    [],
    '405 on a documented path',
  );
  t.strictSame(
    validateAnswer(
      'POST',
      '/v1/auth/login',
      200,
      json(),
      JSON.stringify({
        access_token: 'a.b.c',
        token_type: 'bearer',
        expires_in: 86400,
        tenant_slug: 'acme',
        user: { id: 1, email: 'o@acme.test', role: 'owner' },
      }),
    ),
    [],
    'a JSON text body is parsed',
  );
  t.strictSame(
    validateComponent('LiveConcurrencyMessage', { type: 'concurrency', ts: '2026-11-21T10:00:00Z', value: 12 }),
    [],
  );
  t.strictSame(validateComponent('LiveAlertMessage', { type: 'alert', ...alert }), []);
});

t.test('validateAnswer reports what does not fit', async (t) => {
  /** Exactly these problems, in this order: a stray extra problem would hide a validator that reports noise. */
  const expect = (problems: string[], patterns: RegExp[], name: string): void => {
    t.equal(problems.length, patterns.length, `${name}: ${patterns.length} problem(s)`);
    t.match(problems, patterns, name);
  };
  const list = json({ ...rate, 'X-Total-Count': '1' });
  const { created_at: _dropped, ...missing } = keyRow;
  expect(
    validateAnswer('GET', '/v1/api-keys', 200, list, [missing]),
    [/body\/0: must have required property 'created_at'/],
    'a missing field',
  );
  expect(
    validateAnswer('GET', '/v1/api-keys', 200, list, [{ ...keyRow, key: 'dk_live_x' }]),
    [/must NOT have additional properties \(key\)/],
    'an extra field',
  );
  expect(
    validateAnswer('GET', '/v1/analytics/alerts', 200, list, [{ ...alert, id: '7' }]),
    [/body\/0\/id: must be integer/],
    'a wrong type',
  );
  expect(
    validateAnswer('GET', '/v1/analytics/alerts', 200, list, [{ ...alert, created_at: 'yesterday' }]),
    [/must match format "date-time"/],
    'a bad timestamp',
  );
  expect(
    validateAnswer('GET', '/v1/analytics/alerts', 200, list, [{ ...alert, severity: 'severe' }]),
    [/must be equal to one of the allowed values/],
    'a value outside an enum',
  );
  expect(
    validateAnswer('GET', '/v1/analytics/alerts', 200, list, [{ ...alert, resolved_at: undefined }]),
    [/required property 'resolved_at'/],
    'a nullable field left out rather than null',
  );
  expect(
    validateAnswer('POST', '/v1/ingest/events', 418, json(rate), {}),
    [/status 418 is not documented/],
    'an undocumented status',
  );
  expect(
    validateAnswer('GET', '/v1/nowhere', 404, json(), {
      error: { code: 'not_found', message: 'm', request_id: requestId },
    }),
    [/path is not documented/],
    'an unknown path',
  );
  expect(
    validateAnswer('PATCH', '/v1/api-keys', 200, json(), {}),
    [/method PATCH is not documented/],
    'an undocumented method',
  );
  expect(
    validateAnswer('GET', '/v1/api-keys', 200, new Headers({ 'content-type': 'application/json', ...rate }), []),
    [/X-Request-Id is required/, /X-Total-Count is required/],
    'missing required headers',
  );
  expect(
    validateAnswer('GET', '/v1/analytics/overview', 403, json(), {
      error: { code: 'insufficient_scope', message: 'm', request_id: requestId },
    }),
    [/RateLimit-Limit is required on 403/, /RateLimit-Remaining/, /RateLimit-Reset/],
    'a counted answer without RateLimit-*',
  );
  expect(
    validateAnswer('POST', '/v1/ingest/events', 200, json({ ...rate, 'RateLimit-Remaining': 'lots' }), {
      accepted: 1,
      rejected: 0,
      queued: true,
      errors: [],
    }),
    [/RateLimit-Remaining "lots" is not a integer/],
    'a malformed header',
  );
  expect(
    validateAnswer('POST', '/v1/ingest/events', 429, json(rate), {
      error: { code: 'rate_limited', message: 'm', request_id: requestId },
    }),
    [/Retry-After is required on 429/],
    'a 429 without Retry-After',
  );
  expect(
    validateAnswer('POST', '/v1/ingest/events', 401, json(rate), {
      error: { code: 'unauthorized', message: 'm', request_id: requestId },
    }),
    [/code: must be equal to one of the allowed values \(\["invalid_api_key"\]\)/],
    'a code the status does not give',
  );
  expect(
    validateAnswer('POST', '/v1/ingest/events', 400, json(rate), { error: { code: 'invalid_json', message: 'm' } }),
    [/required property 'request_id'/],
    'an error body without request_id',
  );
  expect(
    validateAnswer('POST', '/v1/ingest/beacon', 200, json(rate), {
      accepted: 0,
      rejected: 1,
      queued: false,
      errors: [{ code: 'invalid_api_key', message: 'm' }],
    }),
    [/required property 'request_id'/, /must match "else" schema/],
    'a beacon failure without request_id',
  );
  expect(
    validateAnswer('GET', '/readyz', 503, json(), {
      error: { code: 'not_ready', message: 'm', request_id: 'another-id' },
    }),
    [/request_id "another-id" differs from X-Request-Id/],
    'a body naming another request',
  );
  expect(
    validateAnswer(
      'GET',
      '/healthz',
      200,
      new Headers({ 'x-request-id': requestId, 'content-type': 'text/html' }),
      '<p>ok</p>',
    ),
    [/content-type "text\/html" is not one of application\/json/],
    'an undocumented content type',
  );
  expect(
    validateAnswer('GET', '/v1/openapi.json', 405, json(), {
      error: { code: 'method_not_allowed', message: 'm', request_id: requestId },
    }),
    [/status 405 is not documented/],
    'a 405 for a documented method',
  );
  expect(
    validateComponent('LiveConcurrencyMessage', { type: 'concurrency', ts: 'now', value: -1 }),
    [/format "date-time"/, /must be >= 0/],
    'a live message',
  );
});
