import { createReadStream } from 'node:fs';
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  drainFactor,
  FileBody,
  type BodyResult,
  type Engine,
  type EngineServer,
  type RawRequest,
  type UpgradeDispatch,
  type WireReply,
  type WsSession,
} from '../types.js';
import { normaliseAddress } from '../address.js';
import { fail, ok } from '../../result.js';

/** The body up to `max`; past it, read and dropped up to `drainLimit` so the 413 reaches the client (`drainFactor`). */
function readBody(req: IncomingMessage, max: number, drainLimit: number): Promise<BodyResult> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > drainLimit) return Promise.resolve(fail('too_large'));
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let overflow = Number.isFinite(declared) && declared > max;
    let settled = false;
    const settle = (r: BodyResult): void => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    const whole = (): BodyResult => (overflow ? fail('too_large') : ok(Buffer.concat(chunks, size)));
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (!overflow && size > max) {
        overflow = true;
        chunks.length = 0;
      }
      if (!overflow) chunks.push(chunk);
      else if (size > drainLimit) {
        req.pause();
        settle(fail('too_large'));
      }
    });
    req.on('end', () => settle(whole()));
    req.on('aborted', () => settle(fail('aborted')));
    req.on('error', () => settle(fail('aborted')));
    req.on('close', () => settle(req.complete ? whole() : fail('aborted')));
  });
}

function write(res: ServerResponse, reply: WireReply): void {
  if (reply.close) res.shouldKeepAlive = false;
  const headers: Record<string, string> = {};
  for (const [k, v] of reply.headers) headers[k] = v;
  const body = reply.body;
  if (body instanceof FileBody) {
    headers['content-length'] = String(body.size);
    res.writeHead(reply.status, headers);
    // A read error mid-file can only cut the connection: the status is sent. The client sees a short body.
    pipeline(createReadStream(body.path), res).catch(() => res.destroy());
    return;
  }
  headers['content-length'] = String(Buffer.byteLength(body));
  res.writeHead(reply.status, headers);
  res.end(body);
}

function toRaw(req: IncomingMessage, bodyCap: number, isAborted: () => boolean): RawRequest {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const headers = new Map<string, string>();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  }
  return {
    method: (req.method ?? 'GET').toUpperCase(),
    path: q === -1 ? url : url.slice(0, q),
    search: q === -1 ? '' : url.slice(q + 1),
    headers,
    remoteAddress: normaliseAddress(req.socket.remoteAddress ?? ''),
    readBody: (max) => readBody(req, Math.min(max, bodyCap), bodyCap * drainFactor),
    isAborted,
  };
}

/** A refused upgrade: an ordinary HTTP answer written on the raw socket, which then closes. */
function writeRaw(socket: Duplex, reply: WireReply): void {
  // Refusals are error bodies, never files.
  const body = reply.body instanceof FileBody ? '' : reply.body;
  const lines = [
    `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? 'Unknown'}`,
    ...reply.headers.map(([k, v]) => `${k}: ${v}`),
  ];
  lines.push(`content-length: ${Buffer.byteLength(body)}`, 'connection: close', '', '');
  socket.end(Buffer.concat([Buffer.from(lines.join('\r\n')), Buffer.from(body)]));
}

function handleUpgrades(upgrade: UpgradeDispatch, bodyCap: number) {
  const chosen = new WeakMap<IncomingMessage, { protocol: string | null; requestId: string }>();
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 64 * 1024,
    handleProtocols: (_offered, req) => chosen.get(req)?.protocol ?? false,
  });
  wss.on('headers', (headers, req) => {
    const c = chosen.get(req);
    if (c) headers.push(`x-request-id: ${c.requestId}`);
  });
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    let aborted = false;
    socket.on('close', () => (aborted = true));
    socket.on('error', () => (aborted = true));
    void upgrade(toRaw(req, bodyCap, () => aborted)).then((r) => {
      if (aborted) {
        if (r.ok) r.value.session.closed();
        return;
      }
      if (!r.ok) {
        writeRaw(socket, r.error);
        return;
      }
      const { session, requestId } = r.value;
      chosen.set(req, { protocol: session.protocol, requestId });
      wss.handleUpgrade(req, socket, head, (ws) => open(ws, session));
    });
  };
}

function open(ws: WebSocket, session: WsSession): void {
  let closed = false;
  ws.on('close', () => {
    if (closed) return;
    closed = true;
    session.closed();
  });
  ws.on('error', () => ws.terminate());
  // Clients only listen; a client that floods us is cut off rather than buffered.
  ws.on('message', () => undefined);
  session.opened({
    send(text) {
      if (closed || ws.readyState !== ws.OPEN || ws.bufferedAmount > 1024 * 1024) return false;
      ws.send(text);
      return true;
    },
    close(code, reason) {
      if (!closed) ws.close(code, reason);
    },
  });
}

export const nodeEngine: Engine = {
  name: 'node',
  websockets: true,
  listen(host, port, bodyCap, dispatch, upgrade) {
    const server = createServer({ keepAlive: true, requestTimeout: 30_000, headersTimeout: 15_000 }, (req, res) => {
      let aborted = false;
      res.on('close', () => {
        if (!res.writableFinished) aborted = true;
      });
      void dispatch(toRaw(req, bodyCap, () => aborted)).then((reply) => {
        if (!aborted && !res.headersSent) write(res, reply);
      });
    });
    server.keepAliveTimeout = 10_000;
    if (upgrade) server.on('upgrade', handleUpgrades(upgrade, bodyCap));
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
