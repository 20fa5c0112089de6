import { randomUUID } from 'node:crypto';
import type { Logger } from '../log.js';
import { errorBody, errorStatus, type RequestErrorCode } from '../errors.js';
import { httpDuration, httpEngineInfo, httpRequests } from '../metrics.js';
import { fail, ok } from '../result.js';
import { nodeEngine } from './engines/node.js';
import { loadUws } from './engines/uws.js';
import { Router } from './router.js';
import {
  FileBody,
  type BodyResult,
  type Engine,
  type EngineName,
  type Handler,
  type HttpReply,
  type HttpRequest,
  type RawRequest,
  type Route,
  type UpgradeDispatch,
  type WireReply,
  type WsRoute,
} from './types.js';

export interface CorsOptions {
  /** `*` answers any origin (ingest); a list answers only those. */
  origins: '*' | readonly string[];
  allowHeaders: readonly string[];
  exposeHeaders: readonly string[];
}

export interface HttpServerOptions {
  /** Label in logs and metrics: `ingest` or `base`. */
  listener: string;
  host: string;
  port: number;
  engine: 'auto' | EngineName;
  routes: readonly Route[];
  maxBodyBytes: number;
  cors?: CorsOptions;
  log: Logger;
  /** Headers added to every answer of this listener, computed per request (ingest: RateLimit-*). */
  commonHeaders?: (req: HttpRequest) => Record<string, string>;
  /** WebSocket endpoints (the api's live feed). */
  websockets?: readonly WsRoute[];
  /** Answers a GET or HEAD that no route matches (the api's dashboard pages); a 404 without it. */
  fallback?: Handler;
}

export interface HttpServer {
  readonly engine: EngineName;
  readonly port: number;
  /** Stop accepting, let requests under way finish (up to `graceMs`), then close every connection. */
  close(graceMs?: number): Promise<void>;
}

/**
 * uWebSockets.js where its pinned binary loads, else node:http. A listener with WebSocket endpoints (the api's live
 * feed) runs on node:http and `ws`: with this uWS build, upgraded sockets were seen to close abnormally (1006) a few
 * milliseconds after opening, in about 3 of 4 runs under load, and the api listener's traffic does not need uWS's
 * throughput. Ingest, the hot path, keeps uWS.
 */
export function selectEngine(preference: 'auto' | EngineName, log: Logger, websockets = false): Engine {
  if (preference === 'node') return nodeEngine;
  if (websockets) {
    if (preference === 'uws') log.warn('HTTP_ENGINE=uws, but this listener serves WebSockets: using node:http and ws');
    return nodeEngine;
  }
  const uws = loadUws();
  if (uws.ok) return uws.value.engine;
  if (preference === 'uws') throw new Error(`HTTP_ENGINE=uws but uWebSockets.js cannot be used: ${uws.error}`);
  log.warn({ reason: uws.error }, 'uWebSockets.js unavailable; using node:http');
  return nodeEngine;
}

export function replyError(
  req: { requestId: string },
  code: RequestErrorCode,
  message?: string,
  details?: unknown[],
): HttpReply {
  return { status: errorStatus(code), body: errorBody(code, req.requestId, message, details) };
}

const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

class Request implements HttpRequest {
  private parsedQuery: URLSearchParams | undefined;
  constructor(
    private readonly raw: RawRequest,
    readonly requestId: string,
    readonly params: Record<string, string>,
    private readonly maxBodyBytes: number,
  ) {}
  get query(): URLSearchParams {
    this.parsedQuery ??= new URLSearchParams(this.raw.search);
    return this.parsedQuery;
  }
  get method(): string {
    return this.raw.method;
  }
  get path(): string {
    return this.raw.path;
  }
  get remoteAddress(): string {
    return this.raw.remoteAddress;
  }
  header(name: string): string | undefined {
    return this.raw.headers.get(name);
  }
  private bodyRead: Promise<BodyResult> | undefined;
  body(): Promise<BodyResult> {
    this.bodyRead ??= this.raw.readBody(this.maxBodyBytes);
    return this.bodyRead;
  }
  isAborted(): boolean {
    return this.raw.isAborted();
  }
}

function serialize(reply: HttpReply, extra: Array<[string, string]>): WireReply {
  const headers: Array<[string, string]> = [...extra];
  let body: WireReply['body'];
  let type: string | undefined;
  if (reply.body === undefined) body = '';
  else if (typeof reply.body === 'string' || Buffer.isBuffer(reply.body) || reply.body instanceof FileBody)
    body = reply.body;
  else {
    body = JSON.stringify(reply.body);
    type = 'application/json; charset=utf-8';
  }
  let hasType = false;
  let hasCaching = false;
  let hasSniffing = false;
  for (const [k, v] of Object.entries(reply.headers ?? {})) {
    const name = k.toLowerCase();
    if (name === 'content-type') hasType = true;
    if (name === 'cache-control') hasCaching = true;
    if (name === 'x-content-type-options') hasSniffing = true;
    headers.push([k, v]);
  }
  if (!hasType && type) headers.push(['content-type', type]);
  // A browser never guesses another type for an answer, and an answer made for one caller is never kept by a cache.
  if (!hasSniffing) headers.push(['x-content-type-options', 'nosniff']);
  if (type && !hasCaching) headers.push(['cache-control', 'no-store']);
  return { status: reply.status, headers, body, close: reply.close ?? false };
}

// prom-client hashes a label object on every call; the label sets of a listener are few, so bind them once.
const bound = new Map<string, { count: () => void; time: (seconds: number) => void }>();

const knownMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

function observe(listener: string, route: string, rawMethod: string, status: string, seconds: number): void {
  // Any string can arrive as a method: an unbounded label would let a client grow our memory without limit.
  const method = knownMethods.has(rawMethod) ? rawMethod : 'OTHER';
  const key = `${listener}\u0000${route}\u0000${method}\u0000${status}`;
  let b = bound.get(key);
  if (!b) {
    const counter = httpRequests.labels(listener, route, method, status);
    const histogram = httpDuration.labels(listener, route);
    b = { count: () => counter.inc(), time: (s) => histogram.observe(s) };
    bound.set(key, b);
  }
  b.count();
  b.time(seconds);
}

function requestIdOf(raw: RawRequest): string {
  const incoming = raw.headers.get('x-request-id');
  return incoming && requestIdPattern.test(incoming) ? incoming : randomUUID();
}

/** Upgrades go to the WebSocket route of their path; refusals are ordinary answers with the error body. */
export function createUpgradeDispatcher(
  routes: readonly WsRoute[],
  maxBodyBytes: number,
  log: Logger,
): UpgradeDispatch {
  return async (raw) => {
    const started = process.hrtime.bigint();
    const requestId = requestIdOf(raw);
    const req = new Request(raw, requestId, {}, maxBodyBytes);
    const route = routes.find((r) => r.path === raw.path);
    const seconds = (): number => Number(process.hrtime.bigint() - started) / 1e9;
    let reply: HttpReply;
    try {
      if (route) {
        const r = await route.upgrade(req);
        if (r.ok) {
          observe('upgrade', route.path, raw.method, '101', seconds());
          return ok({ session: r.value, requestId });
        }
        reply = r.error;
      } else {
        reply = replyError(req, 'not_found');
      }
    } catch (err) {
      log.error({ err, request_id: requestId, path: raw.path }, 'upgrade failed');
      reply = replyError(req, 'internal_error');
    }
    observe('upgrade', route?.path ?? 'unmatched', raw.method, String(reply.status), seconds());
    return fail(serialize(reply, [['x-request-id', requestId]]));
  };
}

export function createDispatcher(
  options: Omit<HttpServerOptions, 'host' | 'port' | 'engine'>,
): (raw: RawRequest) => Promise<WireReply> {
  const router = new Router(options.routes);
  const log = options.log;
  const cors = options.cors;
  const corsBase: Array<[string, string]> = [];
  if (cors) {
    corsBase.push(['access-control-expose-headers', cors.exposeHeaders.join(', ')]);
  }
  return async (raw) => {
    const started = process.hrtime.bigint();
    const requestId = requestIdOf(raw);
    const extra: Array<[string, string]> = [['x-request-id', requestId]];
    const origin = raw.headers.get('origin');
    if (cors && origin !== undefined) {
      if (cors.origins === '*') extra.push(['access-control-allow-origin', '*'], ...corsBase);
      else if (cors.origins.includes(origin))
        extra.push(['access-control-allow-origin', origin], ['vary', 'Origin'], ...corsBase);
    }
    const match = router.match(raw.method, raw.path);
    let route = 'unmatched';
    let reply: HttpReply;
    const req = new Request(raw, requestId, match.kind === 'found' ? match.params : {}, options.maxBodyBytes);
    try {
      if (raw.method === 'OPTIONS' && cors) {
        route = 'preflight';
        reply = {
          status: 204,
          headers: {
            'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
            'access-control-allow-headers': cors.allowHeaders.join(', '),
            'access-control-max-age': '86400',
          },
        };
      } else if (match.kind === 'found') {
        route = match.pattern;
        reply = await match.handler(req);
      } else if (match.kind === 'method_not_allowed') {
        reply = replyError(req, 'method_not_allowed');
        reply.headers = { allow: match.allow.join(', ') };
      } else if (options.fallback && (raw.method === 'GET' || raw.method === 'HEAD')) {
        route = 'fallback';
        reply = await options.fallback(req);
      } else {
        reply = replyError(req, 'not_found');
      }
    } catch (err) {
      log.error({ err, request_id: requestId, path: raw.path }, 'handler failed');
      reply = replyError(req, 'internal_error');
    }
    if (options.commonHeaders) {
      try {
        reply.headers = { ...options.commonHeaders(req), ...reply.headers };
      } catch (err) {
        log.error({ err }, 'common headers failed');
      }
    }
    const status = String(reply.status);
    observe(options.listener, route, raw.method, status, Number(process.hrtime.bigint() - started) / 1e9);
    return serialize(reply, extra);
  };
}

export async function createHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const engine = selectEngine(options.engine, options.log, (options.websockets?.length ?? 0) > 0);
  const dispatch = createDispatcher(options);
  let underway = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  const upgrade = options.websockets?.length
    ? createUpgradeDispatcher(options.websockets, options.maxBodyBytes, options.log)
    : undefined;
  const server = await engine.listen(
    options.host,
    options.port,
    options.maxBodyBytes,
    async (raw) => {
      // Requests arriving on kept-alive connections while stopping do nothing, so none is half done when they close.
      if (closing) {
        const requestId = requestIdOf(raw);
        const headers = options.commonHeaders
          ? Object.entries(options.commonHeaders(new Request(raw, requestId, {}, 0)))
          : [];
        return serialize({ ...replyError({ requestId }, 'shutting_down'), close: true }, [
          ['x-request-id', requestId],
          ...headers,
        ]);
      }
      underway++;
      try {
        const reply = await dispatch(raw);
        // uWS streams no files here: only the api listener serves them, and it always runs on node:http.
        if (reply.body instanceof FileBody && engine.name === 'uws') {
          const requestId = reply.headers.find(([k]) => k === 'x-request-id')?.[1] ?? requestIdOf(raw);
          options.log.error(
            { request_id: requestId, path: raw.path },
            'a file reply on the uWS engine, which does not stream files: answering 500',
          );
          return serialize(replyError({ requestId }, 'internal_error'), [['x-request-id', requestId]]);
        }
        return reply;
      } finally {
        underway--;
        if (underway === 0) drained?.();
      }
    },
    upgrade,
  );
  httpEngineInfo.set({ listener: options.listener, engine: engine.name }, 1);
  options.log.info(
    { listener: options.listener, engine: engine.name, host: options.host, port: server.port },
    'listening',
  );
  return {
    engine: engine.name,
    port: server.port,
    async close(graceMs = 10_000) {
      closing = true;
      server.stopAccepting();
      if (underway > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, graceMs);
          drained = () => {
            clearTimeout(timer);
            // The engine writes a reply in a promise callback queued after this one: let it run first.
            setImmediate(resolve);
          };
        });
      }
      await server.close();
    },
  };
}
