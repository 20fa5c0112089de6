import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { STATUS_CODES } from 'node:http';
import type * as Uws from 'uWebSockets.js';
import { normaliseAddress } from '../address.js';
import { uwsBinarySha256 } from '../uws-pins.js';
import {
  drainFactor,
  FileBody,
  type BodyResult,
  type Engine,
  type EngineServer,
  type RawRequest,
  type WireReply,
} from '../types.js';
import { fail, ok, type Result } from '../../result.js';

type UwsModule = typeof Uws;

const require = createRequire(import.meta.url);

export type UwsLoad = Result<{ engine: Engine; binary: string; sha256: string }, string>;

let cached: UwsLoad | undefined;

/** Load the platform's uWS binary only if its sha256 is the pinned one; say why not otherwise. */
export function loadUws(): UwsLoad {
  if (cached) return cached;
  cached = tryLoad();
  return cached;
}

function packageDir(): string | null {
  try {
    return dirname(require.resolve('uWebSockets.js/package.json'));
  } catch {
    return null;
  }
}

/**
 * Load this platform's binary from `dir` only if its sha256 is the one in `pins`. Parameters are for tests (a
 * tampered copy must be refused); `loadUws` uses the installed package and the pins in uws-pins.ts.
 */
export function tryLoad(
  dir: string | null = packageDir(),
  pins: Readonly<Record<string, string>> = uwsBinarySha256,
): UwsLoad {
  const binary = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const expected = pins[binary];
  if (!expected) return fail(`no pinned uWebSockets.js binary for ${binary}`);
  if (dir === null) return fail('uWebSockets.js is not installed');
  const path = join(dir, binary);
  let sha256: string;
  try {
    sha256 = createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch (err) {
    return fail(`cannot read ${binary}: ${(err as Error).message}`);
  }
  if (sha256 !== expected) return fail(`${binary} has sha256 ${sha256}, pinned ${expected}`);
  try {
    const mod = require(path) as UwsModule;
    return ok({ engine: uwsEngine(mod), binary, sha256 });
  } catch (err) {
    return fail(`${binary} does not load: ${(err as Error).message.split('\n')[0]}`);
  }
}

const decoder = new TextDecoder();

function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

function uwsEngine(uws: UwsModule): Engine {
  return {
    name: 'uws',
    websockets: false,
    listen(host, port, bodyCap, dispatch) {
      const app = uws.App();
      app.any('/*', (res, req) => {
        // uWS invalidates `req` at the first await: copy what we need now.
        // uWS keeps only the last onAborted handler: one handler, fanning out.
        let aborted = false;
        const onAbort: Array<() => void> = [];
        res.onAborted(() => {
          aborted = true;
          for (const f of onAbort) f();
        });
        const headers = readHeaders(req);
        const method = req.getMethod().toUpperCase();
        const raw = toRaw(res, req, headers, startBody(res, headers, method, onAbort, bodyCap), () => aborted);
        void dispatch(raw).then((reply) => {
          if (aborted) return;
          write(res, reply);
        });
      });
      return new Promise<EngineServer>((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) {
            reject(new Error(`uWebSockets.js cannot listen on ${host}:${port}`));
            return;
          }
          resolve({
            port: uws.us_socket_local_port(socket),
            stopAccepting() {
              uws.us_listen_socket_close(socket);
            },
            async close() {
              uws.us_listen_socket_close(socket);
              app.close();
            },
          });
        });
      });
    },
  };
}

function readHeaders(req: Uws.HttpRequest): Map<string, string> {
  const headers = new Map<string, string>();
  req.forEach((k, v) => {
    const prev = headers.get(k);
    headers.set(k, prev === undefined ? v : `${prev}, ${v}`);
  });
  return headers;
}

function toRaw(
  res: Uws.HttpResponse,
  req: Uws.HttpRequest,
  headers: Map<string, string>,
  readBody: RawRequest['readBody'],
  isAborted: () => boolean,
): RawRequest {
  return {
    method: req.getMethod().toUpperCase(),
    path: req.getUrl(),
    search: req.getQuery() ?? '',
    headers,
    remoteAddress: normaliseAddress(decoder.decode(res.getRemoteAddressAsText())),
    readBody,
    isAborted,
  };
}

function write(res: Uws.HttpResponse, reply: WireReply): void {
  res.cork(() => {
    res.writeStatus(statusLine(reply.status));
    for (const [k, v] of reply.headers) res.writeHeader(k, v);
    // createHttpServer answers 500 in place of a file on this engine (it streams none), so a FileBody never gets here.
    res.end(reply.body instanceof FileBody ? '' : reply.body, reply.close);
  });
}

/**
 * uWS delivers the body only to a handler attached synchronously, so start buffering at once (up to the cap the
 * dispatcher asks for later).
 */
function startBody(
  res: Uws.HttpResponse,
  headers: Map<string, string>,
  method: string,
  onAbort: Array<() => void>,
  bodyCap: number,
): (max: number) => Promise<BodyResult> {
  const hasBody = method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';
  if (!hasBody) return async () => ok(Buffer.alloc(0));
  const declared = Number(headers.get('content-length') ?? NaN);
  const chunks: Buffer[] = [];
  let size = 0;
  let cap = bodyCap;
  let done = false;
  let overflow = false;
  let settle: ((r: BodyResult) => void) | undefined;
  // An outcome reached before anyone asked for the body (abort, overflow) is kept for when they do.
  let early: BodyResult | undefined;
  const finish = (r: BodyResult): void => {
    if (settle) settle(r);
    else early ??= r;
  };
  // Past the cap the rest is read and dropped, so the client gets its 413 instead of a reset (`drainFactor`).
  const drainLimit = bodyCap * drainFactor;
  const tooLarge: BodyResult = fail('too_large');
  res.onData((chunk, isLast) => {
    size += chunk.byteLength;
    if (!overflow && size > cap) {
      overflow = true;
      chunks.length = 0;
    }
    // The ArrayBuffer is only valid during this call.
    if (!overflow) chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
    if (isLast) {
      done = true;
      finish(overflow ? tooLarge : ok(Buffer.concat(chunks, size)));
    } else if (overflow && size > drainLimit) {
      finish(tooLarge);
    }
  });
  onAbort.push(() => finish(fail('aborted')));
  return (max) =>
    new Promise<BodyResult>((resolve) => {
      cap = Math.min(max, bodyCap);
      if (early) {
        resolve(early);
        return;
      }
      if (Number.isFinite(declared) && declared > drainLimit) {
        resolve(tooLarge);
        return;
      }
      if (!overflow && (size > cap || (Number.isFinite(declared) && declared > cap))) {
        overflow = true;
        chunks.length = 0;
      }
      if (done) {
        resolve(overflow ? tooLarge : ok(Buffer.concat(chunks, size)));
        return;
      }
      settle = resolve;
    });
}
