import { Agent as HttpAgent, request as httpRequest, type ClientRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import type { AddressGuard } from '../http/ssrf.js';

export interface SendResult {
  /** A 2xx answer, whole, within the deadline. */
  ok: boolean;
  status: number | null;
  latencyMs: number;
  error: string | null;
  retryAfter: string | null;
  /** The SSRF guard refused the address; nothing was sent. */
  refused: boolean;
}

// Connections are kept alive between attempts. The pools are keyed by the address connected to (the one the guard
// checked), never by host name, so a kept connection only ever reaches an address that was allowed. Idle sockets
// close after 4 s, under the 5 s keep-alive of a node:http receiver.
const agentOptions = {
  keepAlive: true,
  maxSockets: 32,
  maxFreeSockets: 32,
  timeout: 4000,
  scheduling: 'lifo' as const,
};
const agents = { http: new HttpAgent(agentOptions), https: new HttpsAgent(agentOptions) };

/**
 * One POST with a hard deadline over everything (DNS, connect, TLS, the whole answer). Connects to the address the
 * guard checked, with the URL's host name kept for the Host header and TLS (SNI and certificate check). Redirects
 * are not followed: a 3xx is a failure like any non-2xx.
 */
export function postOnce(
  target: URL,
  body: string,
  headers: Record<string, string>,
  guard: AddressGuard,
  timeoutMs: number,
): Promise<SendResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    let req: ClientRequest | undefined;
    let settled = false;
    // `complete`: the answer was read to its end, so the connection goes back to the pool instead of being cut.
    const finish = (r: Omit<SendResult, 'latencyMs' | 'refused'> & { refused?: boolean }, complete = false): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!complete) req?.destroy();
      resolve({ refused: false, ...r, latencyMs: Math.round(performance.now() - started) });
    };
    const timer = setTimeout(
      () => finish({ ok: false, status: null, error: `no complete answer within ${timeoutMs} ms`, retryAfter: null }),
      timeoutMs,
    );
    const send = (resolved: { address: string; family: 4 | 6 }, mayRetry: boolean): void => {
      const tls = target.protocol === 'https:';
      const hostname = target.hostname.replace(/^\[(.*)\]$/, '$1');
      const options = {
        host: resolved.address,
        family: resolved.family,
        port: target.port === '' ? (tls ? 443 : 80) : Number(target.port),
        path: `${target.pathname}${target.search}`,
        method: 'POST',
        agent: tls ? agents.https : agents.http,
        headers: { ...headers, Host: target.host, 'Content-Length': String(Buffer.byteLength(body)) },
        ...(tls && isIP(hostname) === 0 ? { servername: hostname } : {}),
      };
      req = (tls ? httpsRequest : httpRequest)(options, (res) => {
        // Only the status matters: the answer is read to its end (within the deadline) and thrown away.
        res.resume();
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const ok = status >= 200 && status < 300;
          const retryAfter = res.headers['retry-after'];
          finish(
            {
              ok,
              status,
              error: ok ? null : `answered HTTP ${status}`,
              retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
            },
            true,
          );
        });
        res.on('error', (err) =>
          finish({ ok: false, status: res.statusCode ?? null, error: err.message, retryAfter: null }),
        );
      });
      const sent = req;
      sent.on('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive connection the receiver closed just as it was reused: once more on a fresh one (Node's advice).
        if (mayRetry && sent.reusedSocket && err.code === 'ECONNRESET' && !settled) return send(resolved, false);
        finish({ ok: false, status: null, error: err.message, retryAfter: null });
      });
      sent.end(body);
    };
    void guard.resolve(target.hostname).then((resolved) => {
      if (settled) return;
      if (!resolved.ok)
        return finish({ ok: false, status: null, error: resolved.error, retryAfter: null, refused: true });
      send(resolved.value, true);
    });
  });
}
