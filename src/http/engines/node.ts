import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BodyResult, Engine, EngineServer, RawRequest, WireReply } from '../types.js';
import { normaliseAddress } from './uws.js';

function readBody(req: IncomingMessage, max: number): Promise<BodyResult> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > max) return Promise.resolve({ ok: false, reason: 'too_large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (r: BodyResult): void => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > max) {
        chunks.length = 0;
        req.pause();
        settle({ ok: false, reason: 'too_large' });
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => settle({ ok: true, bytes: Buffer.concat(chunks, size) }));
    req.on('aborted', () => settle({ ok: false, reason: 'aborted' }));
    req.on('error', () => settle({ ok: false, reason: 'aborted' }));
    req.on('close', () => settle(req.complete ? { ok: true, bytes: Buffer.concat(chunks, size) } : { ok: false, reason: 'aborted' }));
  });
}

function write(res: ServerResponse, reply: WireReply): void {
  if (reply.close) res.shouldKeepAlive = false;
  const headers: Record<string, string> = {};
  for (const [k, v] of reply.headers) headers[k] = v;
  headers['content-length'] = String(Buffer.byteLength(reply.body));
  res.writeHead(reply.status, headers);
  res.end(reply.body);
}

export const nodeEngine: Engine = {
  name: 'node',
  listen(host, port, bodyCap, dispatch) {
    const server = createServer({ keepAlive: true, requestTimeout: 30_000, headersTimeout: 15_000 }, (req, res) => {
      let aborted = false;
      res.on('close', () => {
        if (!res.writableFinished) aborted = true;
      });
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const headers = new Map<string, string>();
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
      }
      const raw: RawRequest = {
        method: (req.method ?? 'GET').toUpperCase(),
        path: q === -1 ? url : url.slice(0, q),
        search: q === -1 ? '' : url.slice(q + 1),
        headers,
        remoteAddress: normaliseAddress(req.socket.remoteAddress ?? ''),
        readBody: (max) => readBody(req, Math.min(max, bodyCap)),
        isAborted: () => aborted,
      };
      void dispatch(raw).then((reply) => {
        if (!aborted && !res.headersSent) write(res, reply);
      });
    });
    server.keepAliveTimeout = 10_000;
    return new Promise<EngineServer>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve({
          port: (server.address() as AddressInfo).port,
          stopAccepting() {
            // Refuses new connections; keep-alive connections are closed as they go idle.
            server.close();
            server.closeIdleConnections();
          },
          close: () =>
            new Promise<void>((done) => {
              if (!server.listening) {
                server.closeAllConnections();
                done();
                return;
              }
              server.close(() => done());
              server.closeAllConnections();
            }),
        });
      });
    });
  },
};
