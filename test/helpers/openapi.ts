// Checks answers against docs/openapi.json, so the document and the listeners cannot drift apart: every test that
// receives an answer can hand it to validateAnswer / assertValid.
import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import type { Test } from 'tap';

export type JsonSchema = boolean | { [keyword: string]: unknown };

export interface Reference {
  $ref: string;
}

export interface HeaderObject {
  description?: string;
  required?: boolean;
  schema?: JsonSchema;
}

export interface MediaTypeObject {
  schema?: JsonSchema;
}

export interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject | Reference>;
  content?: Record<string, MediaTypeObject>;
}

export interface OperationObject {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
  parameters?: unknown[];
  requestBody?: unknown;
  security?: Array<Record<string, string[]>>;
  responses: Record<string, ResponseObject | Reference>;
}

export const httpMethods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
export type HttpMethod = (typeof httpMethods)[number];

export type PathItem = { [M in HttpMethod]?: OperationObject } & { servers?: unknown[]; parameters?: unknown[] };

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  servers?: Array<{ url: string }>;
  paths: Record<string, PathItem>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses?: Record<string, ResponseObject>;
    headers?: Record<string, HeaderObject>;
    parameters?: Record<string, unknown>;
    securitySchemes?: Record<string, unknown>;
  };
}

export const openapiPath = new URL('../../docs/openapi.json', import.meta.url);
export const openapiDocument = JSON.parse(readFileSync(openapiPath, 'utf8')) as OpenApiDocument;

/** Any URI would do: it only names the document inside Ajv so `$ref`s can point into it. */
const documentId = 'https://darshak.invalid/openapi.json';

// strictRequired is off because `if/then` and `anyOf` branches name fields their parent defines (IngestEvent); the
// unit test checks instead that each closed object requires only properties it has.
const ajv = new Ajv2020({
  strict: true,
  strictTypes: true,
  strictRequired: false,
  allowUnionTypes: true,
  allErrors: true,
});
// Ajv compiles the whole document as the root schema before a fragment of it: its own top-level keys (openapi, info,
// paths…) become annotation keywords, so strict mode still refuses unknown keywords inside the schemas themselves.
ajv.addVocabulary(Object.keys(openapiDocument));
// ajv-formats is CommonJS: under NodeNext the default import is its module.exports, whose `default` is the plugin.
ajvFormats.default(ajv);
ajv.addSchema({ ...openapiDocument, $id: documentId }, undefined, undefined, false);

export function isReference(value: unknown): value is Reference {
  return typeof value === 'object' && value !== null && typeof (value as { $ref?: unknown }).$ref === 'string';
}

/** The value a local `$ref` (`#/components/...`) points at, or undefined when nothing is there. */
export function resolvePointer(ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = openapiDocument;
  for (const key of refParts(ref)) {
    if (typeof node !== 'object' || node === null || !(key in node)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** Follow `$ref`s of Reference Objects (responses, headers) to the object itself. */
export function deref<T>(value: T | Reference): T {
  let current: unknown = value;
  for (let hops = 0; isReference(current); hops++) {
    if (hops > 10) throw new Error(`$ref loop at ${current.$ref}`);
    const target = resolvePointer(current.$ref);
    if (target === undefined) throw new Error(`unresolved $ref ${current.$ref}`);
    current = target;
  }
  return current as T;
}

/** The unescaped segments of a local `$ref`. */
function refParts(ref: string): string[] {
  return ref
    .slice(2)
    .split('/')
    .map((raw) => decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~'));
}

function pointerTo(...parts: string[]): string {
  return '#/' + parts.map((p) => encodeURIComponent(p.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');
}

/** Compiled once per location in the document. */
const validators = new Map<string, ValidateFunction>();

function validatorAt(pointer: string): ValidateFunction {
  let v = validators.get(pointer);
  if (!v) {
    const found = ajv.getSchema(documentId + pointer);
    if (!found) throw new Error(`no schema at ${pointer}`);
    v = found;
    validators.set(pointer, v);
  }
  return v;
}

function describe(where: string, errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const at = `${where}${e.instancePath}`;
    const params =
      e.keyword === 'additionalProperties'
        ? ` (${String(e.params.additionalProperty)})`
        : e.keyword === 'enum'
          ? ` (${JSON.stringify(e.params.allowedValues)})`
          : '';
    return `${at}: ${e.message ?? e.keyword}${params} [${e.schemaPath}]`;
  });
}

/** Problems of `value` against components/schemas/<name> (for what no HTTP answer carries, e.g. live messages). */
export function validateComponent(name: string, value: unknown): string[] {
  if (!(name in openapiDocument.components.schemas)) return [`no schema components/schemas/${name}`];
  const validate = validatorAt(pointerTo('components', 'schemas', name));
  return validate(value) ? [] : describe(name, validate.errors);
}

export interface OperationMatch {
  path: string;
  method: HttpMethod;
  operation: OperationObject;
}

/** The documented path template a concrete path matches: literal segments win over `{param}` ones. */
export function matchPath(path: string): string | undefined {
  const parts = path.split('/');
  let best: { template: string; literals: number } | undefined;
  for (const template of Object.keys(openapiDocument.paths)) {
    const segments = template.split('/');
    if (segments.length !== parts.length) continue;
    let literals = 0;
    const fits = segments.every((s, i) => {
      if (s.startsWith('{') && s.endsWith('}')) return parts[i] !== '';
      literals++;
      return s === parts[i];
    });
    if (fits && (!best || literals > best.literals)) best = { template, literals };
  }
  return best?.template;
}

/** Every documented operation, in document order. */
export function operations(): OperationMatch[] {
  const out: OperationMatch[] = [];
  for (const [path, item] of Object.entries(openapiDocument.paths)) {
    for (const method of httpMethods) {
      const operation = item[method];
      if (operation) out.push({ path, method, operation });
    }
  }
  return out;
}

/** `METHOD path` of each route that the document does not describe (routes use the same `{param}` templates). */
export function undocumentedRoutes(routes: ReadonlyArray<{ method: string; path: string }>): string[] {
  return routes
    .filter((r) => {
      const item = openapiDocument.paths[r.path];
      const method = r.method.toLowerCase();
      return !item || !(httpMethods as readonly string[]).includes(method) || !item[method as HttpMethod];
    })
    .map((r) => `${r.method} ${r.path}`);
}

/** `base`: the location of the response in the document, so each header schema compiles by its location. */
function headerProblems(
  where: string,
  base: string[],
  documented: Record<string, HeaderObject | Reference>,
  headers: Headers,
  status: number,
): string[] {
  const problems: string[] = [];
  for (const [name, raw] of Object.entries(documented)) {
    const spec = deref<HeaderObject>(raw);
    const value = headers.get(name);
    if (value === null) {
      if (spec.required) problems.push(`${where}: header ${name} is required on ${status}`);
      continue;
    }
    if (spec.schema === undefined) continue;
    // Header values are text: a header documented as an integer must be plain decimal digits.
    const type = typeof spec.schema === 'object' ? spec.schema.type : undefined;
    let instance: unknown = value;
    if (type === 'integer' || type === 'number') {
      if (!/^-?(0|[1-9]\d*)(\.\d+)?$/.test(value)) {
        problems.push(`${where}: header ${name} ${JSON.stringify(value)} is not a ${type}`);
        continue;
      }
      instance = Number(value);
    }
    const location = isReference(raw) ? refParts(raw.$ref) : [...base, 'headers', name];
    const validate = validatorAt(pointerTo(...location, 'schema'));
    if (!validate(instance)) problems.push(...describe(`${where}: header ${name}`, validate.errors));
  }
  return problems;
}

/**
 * Compile every schema the validator can meet (components, response bodies, response headers), so a schema Ajv's
 * strict mode refuses is found by the unit test rather than by the first e2e test that meets it.
 */
export function compileEverything(): string[] {
  const failures: string[] = [];
  const attempt = (pointer: string): void => {
    try {
      validatorAt(pointer);
    } catch (err) {
      failures.push(`${pointer}: ${(err as Error).message}`);
    }
  };
  const responseSchemas = (response: ResponseObject, base: string[]): void => {
    for (const [name, header] of Object.entries(response.headers ?? {})) {
      attempt(pointerTo(...(isReference(header) ? refParts(header.$ref) : [...base, 'headers', name]), 'schema'));
    }
    for (const [mediaType, media] of Object.entries(response.content ?? {})) {
      if (media.schema !== undefined) attempt(pointerTo(...base, 'content', mediaType, 'schema'));
    }
  };
  for (const name of Object.keys(openapiDocument.components.schemas)) attempt(pointerTo('components', 'schemas', name));
  for (const [name, response] of Object.entries(openapiDocument.components.responses ?? {}))
    responseSchemas(response, ['components', 'responses', name]);
  for (const { path, method, operation } of operations()) {
    for (const [status, response] of Object.entries(operation.responses)) {
      if (!isReference(response)) responseSchemas(response, ['paths', path, method, 'responses', status]);
    }
  }
  return failures;
}

/** The request id an answer body names: `error.request_id`, or the beacon's top-level `request_id`. */
function requestIdOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { error, request_id: top } = body as { error?: { request_id?: unknown }; request_id?: unknown };
  const id = typeof error === 'object' && error !== null ? error.request_id : top;
  return typeof id === 'string' ? id : undefined;
}

function isEmpty(body: unknown): boolean {
  return body === undefined || body === null || body === '';
}

/**
 * Problems of one answer against the document: the operation exists, the status is documented, the body fits the
 * schema of its content type, and the required headers are present and well-formed. Empty when the answer is fine.
 * `url` may be absolute or a path; `body` is the parsed JSON (a string is parsed when the answer is JSON).
 */
export function validateAnswer(method: string, url: string, status: number, headers: Headers, body: unknown): string[] {
  const path = new URL(url, 'http://placeholder.invalid').pathname;
  const verb = method.toUpperCase();
  const where = `${verb} ${path} → ${status}`;
  const template = matchPath(path);
  if (!template) return [`${where}: path is not documented`];
  const item = openapiDocument.paths[template] as PathItem;
  // HEAD is answered as GET without a body (src/http/router.ts).
  const lookup = (verb === 'HEAD' && !item.head ? 'get' : verb.toLowerCase()) as HttpMethod;
  const operation = (httpMethods as readonly string[]).includes(lookup) ? item[lookup] : undefined;

  let response: ResponseObject | undefined;
  let schemaBase: string[] = [];
  if (operation) {
    const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => k in operation.responses);
    if (key === undefined) return [`${where}: status ${status} is not documented for ${verb} ${template}`];
    const raw = operation.responses[key] as ResponseObject | Reference;
    response = deref<ResponseObject>(raw);
    schemaBase = isReference(raw) ? refParts(raw.$ref) : ['paths', template, lookup, 'responses', key];
  } else if (status === 405 && openapiDocument.components.responses?.MethodNotAllowed) {
    // A documented path asked with another method: the one answer the document describes outside operations.
    response = openapiDocument.components.responses.MethodNotAllowed;
    schemaBase = ['components', 'responses', 'MethodNotAllowed'];
  } else {
    return [`${where}: method ${verb} is not documented for ${template}`];
  }

  const problems = headerProblems(where, schemaBase, response.headers ?? {}, headers, status);
  const content = response.content ?? {};
  const mediaTypes = Object.keys(content);
  if (verb === 'HEAD') return problems;
  if (mediaTypes.length === 0) {
    if (!isEmpty(body)) problems.push(`${where}: no body is documented, got ${JSON.stringify(body).slice(0, 200)}`);
    return problems;
  }
  const contentType = (headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const mediaType = mediaTypes.find((m) => m.toLowerCase() === contentType);
  if (!mediaType) {
    problems.push(`${where}: content-type ${JSON.stringify(contentType)} is not one of ${mediaTypes.join(', ')}`);
    return problems;
  }
  if (!content[mediaType]?.schema) return problems;
  let instance = body;
  if (mediaType === 'application/json' && typeof body === 'string') {
    try {
      instance = JSON.parse(body);
    } catch {
      problems.push(`${where}: body is not JSON`);
      return problems;
    }
  }
  const validate = validatorAt(pointerTo(...schemaBase, 'content', mediaType, 'schema'));
  if (!validate(instance)) problems.push(...describe(`${where}: body`, validate.errors));
  const bodyId = requestIdOf(instance);
  const headerId = headers.get('x-request-id');
  if (bodyId !== undefined && headerId !== null && bodyId !== headerId)
    problems.push(
      `${where}: request_id ${JSON.stringify(bodyId)} differs from X-Request-Id ${JSON.stringify(headerId)}`,
    );
  return problems;
}

/** What a test received (test/helpers/api.ts's ApiAnswer fits). */
export interface ReceivedAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** The tap form: one assertion per answer, listing every problem when it fails. */
export function assertValid(t: Pick<Test, 'strictSame'>, method: string, url: string, res: ReceivedAnswer): boolean {
  const path = new URL(url, 'http://placeholder.invalid').pathname;
  return t.strictSame(
    validateAnswer(method, url, res.status, res.headers, res.body),
    [],
    `${method.toUpperCase()} ${path} → ${res.status} matches docs/openapi.json`,
  );
}

/**
 * The path item a metric's list endpoint (src/metric/endpoint.ts) must have in docs/openapi.json: the same as the
 * seed's list answers (range, limit, offset; the list's headers and errors), its words and item from the declaration.
 */
export function listPathItem(e: {
  operationId: string;
  summary: string;
  description: string;
  itemName: string;
  items: string;
}): PathItem {
  const header = (name: string) => ({ $ref: `#/components/headers/${name}` });
  const error = (name: string) => ({ $ref: `#/components/responses/${name}` });
  return {
    servers: openapiDocument.paths['/v1/analytics/qos']!.servers,
    parameters: [{ $ref: '#/components/parameters/RequestId' }],
    get: {
      operationId: e.operationId,
      tags: ['analytics'],
      summary: e.summary,
      security: [{ bearerJwt: ['analytics:read'] }],
      parameters: ['Range', 'Limit', 'Offset'].map((p) => ({ $ref: `#/components/parameters/${p}` })),
      responses: {
        '200': {
          description: e.items,
          headers: {
            'X-Request-Id': header('XRequestId'),
            'RateLimit-Limit': header('RateLimitLimit'),
            'RateLimit-Remaining': header('RateLimitRemaining'),
            'RateLimit-Reset': header('RateLimitReset'),
            'X-Total-Count': header('XTotalCount'),
          },
          content: {
            'application/json': { schema: { type: 'array', items: { $ref: `#/components/schemas/${e.itemName}` } } },
          },
        },
        '400': error('BadParameter'),
        '401': error('Unauthorized'),
        '403': error('Forbidden'),
        '429': error('RateLimited'),
        '500': error('InternalError'),
        '503': error('ShuttingDown'),
      },
      description: e.description,
    },
  };
}
