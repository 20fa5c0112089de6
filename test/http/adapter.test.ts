import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as rawRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { registry } from '../../src/metrics.js';
import { createHttpServer, replyError } from '../../src/http/server.js';
import type { HttpServer } from '../../src/http/server.js';
import { drainFactor, FileBody, type Route } from '../../src/http/types.js';
import { engineTest } from '../helpers/engines.js';
import { oversizeOutcomes } from '../helpers/oversize.js';

// The same suite on both engines: handlers must not be able to tell them apart.

const log = createLogger('silent');
const fileDir = mkdtempSync(join(tmpdir(), 'darshak-adapter-'));
t.teardown(() => rmSync(fileDir, { recursive: true, force: true }));
// Larger than a socket buffer, so it really streams.
const fileBytes = randomBytes(3 * 1024 * 1024 + 17);
const filePath = join(fileDir, 'data.bin');
writeFileSync(filePath, fileBytes);
let abortedSeen: (v: boolean) => void = () => undefined;

const routes: Route[] = [
  {
    method: 'GET',
    path: '/hello',
    handler: (req) => ({ status: 200, body: { hello: req.query.get('name') ?? 'world', id: req.requestId } }),
  },
  { method: 'GET', path: '/items/{id}', handler: (req) => ({ status: 200, body: { id: req.params.id } }) },
  {
    method: 'POST',
    path: '/echo',
    async handler(req) {
      // `wait`: read the body only after a lookup's time, as ingest does after its key.
      const wait = Number(req.query.get('wait') ?? 0);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const body = await req.body();
      if (!body.ok) return { ...replyError(req, 'payload_too_large'), close: true };
      return { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: body.value };
    },
  },
  {
    method: 'POST',
    path: '/slow',
    async handler(req) {
      await new Promise((r) => setTimeout(r, 300));
      abortedSeen(req.isAborted());
      return { status: 200, body: 'late' };
    },
  },
  {
    method: 'GET',
    path: '/file',
    handler: () => ({
      status: 200,
      headers: { 'content-type': 'application/octet-stream' },
      body: new FileBody(filePath, fileBytes.length),
    }),
  },
  {
    method: 'GET',
    path: '/boom',
    handler() {
      throw new Error('handler bug');
    },
  },
];

for (const engine of ['uws', 'node'] as const) {
  t.test(`engine ${engine}`, engineTest(engine), async (t) => {
    let server: HttpServer;
    try {
      server = await createHttpServer({
        listener: `test-${engine}`,
        host: '127.0.0.1',
        port: 0,
        engine,
        routes,
        maxBodyBytes: 1024,
        cors: { origins: '*', allowHeaders: ['Content-Type', 'X-API-Key'], exposeHeaders: ['X-Request-Id'] },
        log,
        commonHeaders: () => ({ 'x-common': 'yes' }),
      });
    } catch (err) {
      t.fail(`engine ${engine} does not start: ${(err as Error).message}`);
      return;
    }
    t.teardown(() => server.close());
    t.equal(server.engine, engine);
    const base = `http://127.0.0.1:${server.port}`;

    t.test('JSON answers, query, request ids, common headers', async (t) => {
      const res = await fetch(`${base}/hello?name=ravi`);
      t.equal(res.status, 200);
      t.match(res.headers.get('content-type'), /^application\/json/);
      t.equal(res.headers.get('x-common'), 'yes');
      const id = res.headers.get('x-request-id');
      t.match(id, /^[0-9a-f-]{36}$/);
      t.same(await res.json(), { hello: 'ravi', id });
      const mine = await fetch(`${base}/hello`, { headers: { 'x-request-id': 'trace-123' } });
      t.equal(mine.headers.get('x-request-id'), 'trace-123', 'a sane incoming id is kept');
      const hostile = await fetch(`${base}/hello`, { headers: { 'x-request-id': '<script>' } });
      t.not(hostile.headers.get('x-request-id'), '<script>', 'an unsafe incoming id is replaced');
      t.equal(res.headers.get('x-content-type-options'), 'nosniff', 'no type sniffing');
      t.equal(res.headers.get('cache-control'), 'no-store', 'a JSON answer is kept by no cache');
      const bytes = await fetch(`${base}/echo`, { method: 'POST', body: 'abc' });
      t.equal(bytes.headers.get('x-content-type-options'), 'nosniff', 'nor any other answer');
      t.equal(bytes.headers.get('cache-control'), null, 'an answer that is not JSON decides its own caching');
    });

    t.test('path parameters are decoded', async (t) => {
      t.same(await (await fetch(`${base}/items/a%20b`)).json(), { id: 'a b' });
      t.equal((await fetch(`${base}/items/%E0%A4`)).status, 404, 'undecodable parameter matches nothing');
    });

    t.test('404 and 405 carry the error body', async (t) => {
      const nf = await fetch(`${base}/nope`);
      t.equal(nf.status, 404);
      const body = (await nf.json()) as { error: { code: string; request_id: string } };
      t.equal(body.error.code, 'not_found');
      t.equal(body.error.request_id, nf.headers.get('x-request-id'));
      const na = await fetch(`${base}/hello`, { method: 'POST' });
      t.equal(na.status, 405);
      t.equal(na.headers.get('allow'), 'GET');
      t.equal(((await na.json()) as { error: { code: string } }).error.code, 'method_not_allowed');
    });

    t.test('bodies are read whole, up to the cap', async (t) => {
      const payload = Buffer.alloc(1024, 7);
      const ok = await fetch(`${base}/echo`, { method: 'POST', body: payload });
      t.equal(ok.status, 200);
      t.same(Buffer.from(await ok.arrayBuffer()), payload);
      const big = await fetch(`${base}/echo`, { method: 'POST', body: Buffer.alloc(1025, 7) });
      t.equal(big.status, 413);
      t.equal(((await big.json()) as { error: { code: string } }).error.code, 'payload_too_large');
    });

    t.test('a chunked body over the cap is refused without a declared length', async (t) => {
      const status = await new Promise<number>((resolve, reject) => {
        const req = rawRequest(
          `${base}/echo`,
          { method: 'POST', headers: { 'transfer-encoding': 'chunked' } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        for (let i = 0; i < 8; i++) req.write(Buffer.alloc(512, 1));
        req.end();
      });
      t.equal(status, 413);
    });

    t.test('CORS: preflight and allow-origin', async (t) => {
      const pre = await fetch(`${base}/echo`, {
        method: 'OPTIONS',
        headers: { origin: 'https://player.example', 'access-control-request-method': 'POST' },
      });
      t.equal(pre.status, 204);
      t.equal(pre.headers.get('access-control-allow-origin'), '*');
      t.match(pre.headers.get('access-control-allow-headers'), /X-API-Key/);
      const res = await fetch(`${base}/hello`, { headers: { origin: 'https://player.example' } });
      t.equal(res.headers.get('access-control-allow-origin'), '*');
      t.equal(res.headers.get('access-control-expose-headers'), 'X-Request-Id');
    });

    t.test('a throwing handler answers 500 internal_error and the server lives on', async (t) => {
      const res = await fetch(`${base}/boom`);
      t.equal(res.status, 500);
      t.equal(((await res.json()) as { error: { code: string } }).error.code, 'internal_error');
      t.equal((await fetch(`${base}/hello`)).status, 200);
    });

    t.test('a file body: streamed with Content-Length on node:http, 500 on uWS (which streams no files)', async (t) => {
      const res = await fetch(`${base}/file`);
      if (engine === 'node') {
        t.equal(res.status, 200);
        t.equal(res.headers.get('content-length'), String(fileBytes.length));
        t.equal(res.headers.get('content-type'), 'application/octet-stream');
        t.ok(Buffer.from(await res.arrayBuffer()).equals(fileBytes), 'every byte');
      } else {
        t.equal(res.status, 500);
        t.equal(((await res.json()) as { error: { code: string } }).error.code, 'internal_error');
      }
    });

    t.test('a client that goes away is noticed, and nothing is written to it', async (t) => {
      const seen = new Promise<boolean>((r) => (abortedSeen = r));
      const ctl = new AbortController();
      const pending = fetch(`${base}/slow`, { method: 'POST', body: 'x', signal: ctl.signal }).catch(
        (e: Error) => e.name,
      );
      await new Promise((r) => setTimeout(r, 100));
      ctl.abort();
      t.equal(await pending, 'AbortError');
      t.equal(await seen, true, 'handler sees isAborted()');
      t.equal((await fetch(`${base}/hello`)).status, 200, 'server still answers');
    });

    t.test('the engine in use is exported in metrics', async (t) => {
      t.match(
        await registry.metrics(),
        new RegExp(`darshak_http_engine_info\\{listener="test-${engine}",engine="${engine}"\\} 1`),
      );
    });
  });
}

t.test('metrics labels stay bounded whatever methods clients invent', async (t) => {
  // node:http refuses unknown methods in its parser; uWS hands them to us.
  const server = await createHttpServer({
    listener: 'labels',
    host: '127.0.0.1',
    port: 0,
    engine: 'auto',
    routes,
    maxBodyBytes: 1024,
    log,
  });
  t.teardown(() => server.close());
  if (server.engine !== 'uws') {
    t.comment('uWebSockets.js does not load here: only uWS passes invented methods through');
    return;
  }
  const { request } = await import('node:http');
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((resolve) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: '/nope', method: `X${i}METHOD` }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', () => resolve());
      req.end();
    });
  }
  const lines = (await registry.metrics())
    .split('\n')
    .filter((l) => l.startsWith('darshak_http_requests_total{listener="labels"'));
  t.ok(lines.length > 0);
  t.ok(
    lines.every((l) => l.includes('method="OTHER"')),
    'invented methods are counted as OTHER',
  );
});

for (const engine of ['uws', 'node'] as const) {
  t.test(
    `${engine}: a body over the cap gets a 413 the client can read, not a broken connection`,
    engineTest(engine),
    async (t) => {
      const cap = 1024 * 1024;
      const server = await createHttpServer({
        listener: `oversize-${engine}`,
        host: '127.0.0.1',
        port: 0,
        engine,
        routes,
        maxBodyBytes: cap,
        log,
      });
      t.teardown(() => server.close());
      // Larger than socket buffers, so the client is still sending when the answer is ready; `?wait=20` reads the body
      // only after a lookup's time, as ingest does after its key (issue 60: a 1.1 MB batch got EPIPE, 9 in 20).
      const sizes = [cap + 1, 1_100_000, 3 * cap, drainFactor * cap];
      const readable = ['413 payload_too_large'];
      for (const path of ['/echo', '/echo?wait=20']) {
        for (const size of sizes) {
          const seen = await oversizeOutcomes(`http://127.0.0.1:${server.port}${path}`, randomBytes(size));
          t.same(seen, { fetch: readable, keepAlive: readable, closed: readable }, `${path}, ${size} B`);
        }
      }
      // Past the drain limit the connection is cut rather than an unbounded body read: a chunked upload of 4 drain
      // limits fails before the client has written it all.
      const total = 4 * drainFactor * cap;
      const endless = await new Promise<{ outcome: string; sent: number }>((resolve) => {
        let sent = 0;
        const req = rawRequest({ host: '127.0.0.1', port: server.port, path: '/echo', method: 'POST' }, (res) => {
          res.resume();
          res.on('end', () => resolve({ outcome: String(res.statusCode), sent }));
        });
        req.on('error', (err: NodeJS.ErrnoException) => resolve({ outcome: `failed: ${err.code}`, sent }));
        const chunk = Buffer.alloc(64 * 1024, 0x61);
        const pump = (): void => {
          while (sent < total) {
            sent += chunk.length;
            if (!req.write(chunk)) {
              req.once('drain', pump);
              return;
            }
          }
          req.end();
        };
        pump();
      });
      t.ok(endless.sent < total, `cut after ${endless.sent} of ${total} B (${endless.outcome})`);
      t.equal((await fetch(`http://127.0.0.1:${server.port}/hello`)).status, 200, 'the server still answers');
    },
  );
}
