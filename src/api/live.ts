import type { ClickHouseClient } from '@clickhouse/client';
import type { Subscription } from 'nats';
import type { Bus } from '../bus/bus.js';
import { replyError } from '../http/server.js';
import type { HttpReply, HttpRequest, Route, UpgradeResult, WsRoute, WsSocket } from '../http/types.js';
import type { Logger } from '../log.js';
import { fail, ok } from '../result.js';
import { select } from '../store/queries/range.js';
import type { Authenticator } from './auth.js';
import { bearerToken, jwtShape } from './auth.js';
import type { Principal } from './tokens.js';

export const liveProtocol = 'darshak.v1';
/** How far behind now the pushed second is: the aggregators seal output every ≤ 1 s and flush within about that. */
export const liveLagSeconds = 2;
/** Close code for a connection whose token expired or was revoked (4000–4999 are the application's). */
export const closeUnauthorized = 4001;
/** Live connections one token may hold open at once: a dashboard needs one or two, a leaked token no more. */
export const liveMaxPerToken = 5;

interface Listener {
  principal: Principal;
  socket: WsSocket;
}

/** The token of an upgrade: `?token=`, else offered in Sec-WebSocket-Protocol next to `darshak.v1`, else a Bearer header. */
function upgradeToken(req: HttpRequest): { token: string | null; protocol: string | null } {
  const offered = (req.header('sec-websocket-protocol') ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const protocol = offered.includes(liveProtocol) ? liveProtocol : null;
  const fromQuery = req.query.get('token');
  if (fromQuery) return { token: fromQuery, protocol };
  const fromProtocol = offered.find((p) => jwtShape.test(p));
  return { token: fromProtocol ?? bearerToken(req), protocol };
}

/**
 * `GET /v1/live`: every second, one query for the concurrency of every tenant someone is watching, pushed to each
 * tenant's sockets; alerts pushed as the alerts role publishes them. Tokens are checked again every second, so an
 * expired or revoked one loses its connection.
 */
export class LiveFeed {
  private readonly tenants = new Map<string, Set<Listener>>();
  private timer: NodeJS.Timeout | undefined;
  private alerts: Subscription | undefined;
  private ticking = false;

  constructor(
    private readonly auth: Authenticator,
    private readonly client: ClickHouseClient,
    private readonly bus: Bus,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), 1000);
    this.timer.unref();
    this.alerts = this.bus.nc.subscribe(this.bus.names.alertsLiveSubject('*'), {
      callback: (err, msg) => {
        if (err) return;
        const tenant = msg.subject.slice(msg.subject.lastIndexOf('.') + 1);
        const listeners = this.tenants.get(tenant);
        if (!listeners) return;
        let alert: unknown;
        try {
          alert = JSON.parse(msg.string());
        } catch {
          this.log.warn({ subject: msg.subject }, 'unreadable live alert ignored');
          return;
        }
        const text = JSON.stringify({ ...(alert as object), type: 'alert' });
        for (const l of listeners) l.socket.send(text);
      },
    });
  }

  route(): WsRoute {
    return { path: '/v1/live', upgrade: (req) => this.upgrade(req) };
  }

  /** The same path asked without an upgrade: told what it is. */
  httpRoute(): Route {
    return { method: 'GET', path: '/v1/live', handler: (req) => this.notUpgrade(req) };
  }

  private notUpgrade(req: HttpRequest): HttpReply {
    return replyError(req, 'invalid_request', 'GET /v1/live is a WebSocket endpoint: send Upgrade: websocket');
  }

  private async upgrade(req: HttpRequest): Promise<UpgradeResult> {
    if ((req.header('upgrade') ?? '').toLowerCase() !== 'websocket') return fail(this.notUpgrade(req));
    const { token, protocol } = upgradeToken(req);
    const a = await this.auth.authorize(req, 'analytics:read', token);
    if (!a.ok) return fail(a.error);
    const { principal, headers } = a.value;
    let open = 0;
    for (const l of this.tenants.get(principal.tenant) ?? []) if (l.principal.jti === principal.jti) open++;
    if (open >= liveMaxPerToken) {
      const reply = replyError(
        req,
        'rate_limited',
        `At most ${liveMaxPerToken} live connections per token are open at once; close one first`,
      );
      reply.headers = { ...headers, 'Retry-After': '1' };
      return fail(reply);
    }
    let listener: Listener | undefined;
    return ok({
      protocol,
      opened: (socket) => {
        listener = { principal, socket };
        let set = this.tenants.get(principal.tenant);
        if (!set) this.tenants.set(principal.tenant, (set = new Set()));
        set.add(listener);
      },
      closed: () => {
        if (!listener) return;
        const set = this.tenants.get(principal.tenant);
        set?.delete(listener);
        if (set?.size === 0) this.tenants.delete(principal.tenant);
      },
    });
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.tenants.size === 0) return;
    this.ticking = true;
    try {
      const now = Date.now();
      for (const [, set] of this.tenants) {
        for (const l of set) {
          if (!this.auth.stillValid(l.principal, now)) l.socket.close(closeUnauthorized, 'token expired or revoked');
        }
      }
      const second = Math.floor(now / 1000) - liveLagSeconds;
      const tenants = [...this.tenants.keys()];
      if (tenants.length === 0) return;
      const rows = await select<{ tenant: string; value: string }>(
        this.client,
        `SELECT tenant, sum(sessions) AS value FROM concurrency_seconds
         WHERE tenant IN {tenants:Array(String)} AND ts = toDateTime({second:UInt32}, 'UTC') GROUP BY tenant`,
        { tenants, second },
      );
      const values = new Map(rows.map((r) => [r.tenant, Math.max(0, Number(r.value))]));
      const ts = new Date(second * 1000).toISOString();
      for (const tenant of tenants) {
        const text = JSON.stringify({ type: 'concurrency', ts, value: values.get(tenant) ?? 0 });
        for (const l of this.tenants.get(tenant) ?? []) l.socket.send(text);
      }
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'live concurrency tick failed');
    } finally {
      this.ticking = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.alerts?.unsubscribe();
    for (const [, set] of this.tenants) for (const l of set) l.socket.close(1001, 'server stopping');
    this.tenants.clear();
  }
}
