import { suspended, type ServiceAccountRecord, type TenantRecord, type UserRecord } from '../control/records.js';
import type { WatchedMap } from '../control/watched-map.js';
import { plans } from '../control/plans.js';
import { replyError } from '../http/server.js';
import { rateHeaders, type MinuteLimiter } from '../http/rate-limit.js';
import type { HttpReply, HttpRequest } from '../http/types.js';
import { fail, ok, type Result } from '../result.js';
import type { RevokedTokens } from './revoked-tokens.js';
import type { Principal, TokenService } from './tokens.js';

export type Scope = 'analytics:read' | 'alerts:write' | 'keys:manage' | 'settings:write';

/** The caller, with the rate headers its answer carries; or the answer that refuses it. */
export type Authorized = Result<{ principal: Principal; headers: Record<string, string> }, HttpReply>;

/** A compact JWS: three base64url parts. */
const jwt = '[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+';
export const jwtShape = new RegExp(`^${jwt}$`);
const bearer = new RegExp(`^Bearer (${jwt})$`, 'i');

/** The bearer token of a request, or null when the header is missing or not `Bearer <jwt>`. */
export function bearerToken(req: HttpRequest): string | null {
  const m = bearer.exec(req.header('authorization') ?? '');
  return m ? (m[1] as string) : null;
}

/**
 * Every authenticated request of the API: a token this service signed, whose user or service account still
 * stands, holding the scope; then the per-token rate limit. One place decides, so no endpoint forgets a check.
 */
export class Authenticator {
  constructor(
    private readonly tokens: TokenService,
    private readonly serviceAccounts: WatchedMap<ServiceAccountRecord>,
    private readonly users: WatchedMap<unknown>,
    private readonly limiter: MinuteLimiter,
    private readonly tenants: WatchedMap<TenantRecord>,
    private readonly revoked: Pick<RevokedTokens, 'has'>,
  ) {}

  /** Whether a tenant is suspended (`inactive`): its users and service accounts are refused everywhere. */
  suspended(tenant: string): boolean {
    return suspended(this.tenants.get(tenant));
  }

  /** The principal of a token, or null: signature and claims, then revocation (service accounts) and existence (users). */
  async principal(token: string | null): Promise<Principal | null> {
    if (!token) return null;
    const p = await this.tokens.verify(token);
    if (!p || !this.stillValid(p)) return null;
    const sa = p.role === 'service_account' ? this.serviceAccounts.get(p.sub) : undefined;
    // A service account's scopes are those it was created with, whatever a token claims.
    return sa ? { ...p, scopes: new Set([...p.scopes].filter((s) => sa.scopes.includes(s))) } : p;
  }

  /**
   * Whether a verified principal still stands: not expired, its service account not revoked; its user not gone, not
   * signed out everywhere since (session version) and the token not signed out.
   */
  stillValid(p: Principal, now = Date.now()): boolean {
    if (p.exp * 1000 <= now) return false;
    if (p.role === 'service_account') {
      const sa = this.serviceAccounts.get(p.sub);
      return sa !== undefined && sa.revoked_at === null && sa.tenant === p.tenant && p.jti === sa.id;
    }
    const user = this.users.get(`user.${p.sub}`) as Partial<UserRecord> | undefined;
    return (
      user !== undefined && user.tenant === p.tenant && (user.session_version ?? 0) === p.sv && !this.revoked.has(p.jti)
    );
  }

  /** `scope` null: any valid token. `token`: taken from elsewhere than the Authorization header (the live feed's upgrade). */
  async authorize(req: HttpRequest, scope: Scope | null, token: string | null = bearerToken(req)): Promise<Authorized> {
    const principal = await this.principal(token);
    if (!principal) {
      const reply = replyError(req, 'unauthorized');
      reply.headers = { 'WWW-Authenticate': 'Bearer realm="darshak"' };
      return fail(reply);
    }
    // Per token, and per tenant over all its tokens: a tenant's many service accounts cannot take the listener.
    const rate = this.limiter.take(principal.jti);
    const tenant = this.tenants.get(principal.tenant);
    const tenantRate = this.limiter.take(
      `tenant.${principal.tenant}`,
      Date.now(),
      plans[tenant?.plan ?? 'free'].api_rate_per_minute,
    );
    const tighter = tenantRate.remaining < rate.remaining ? tenantRate : rate;
    const headers = rateHeaders(tighter);
    for (const [r, per] of [
      [rate, 'per token'],
      [tenantRate, 'for this tenant'],
    ] as const) {
      if (r.allowed) continue;
      const reply = replyError(
        req,
        'rate_limited',
        `Rate limit of ${r.limit} requests per minute ${per} reached; retry after ${r.resetSeconds} s`,
      );
      reply.headers = { ...rateHeaders(r), 'Retry-After': String(r.resetSeconds) };
      return fail(reply);
    }
    if (this.suspended(principal.tenant)) {
      const reply = replyError(
        req,
        'tenant_inactive',
        'This tenant is inactive: its dashboard, API and keys work again once it is made active',
      );
      reply.headers = headers;
      return fail(reply);
    }
    if (scope !== null && !principal.scopes.has(scope)) {
      const reply = replyError(req, 'insufficient_scope', `This endpoint needs the scope ${scope}`, [{ scope }]);
      reply.headers = {
        ...headers,
        'WWW-Authenticate': `Bearer realm="darshak", error="insufficient_scope", scope="${scope}"`,
      };
      return fail(reply);
    }
    return ok({ principal, headers });
  }
}

/** A handler that runs only for an authorized caller; the rate headers ride on its answer. */
export function guarded(
  auth: Authenticator,
  scope: Scope | null,
  handler: (req: HttpRequest, principal: Principal) => Promise<HttpReply>,
) {
  return async (req: HttpRequest): Promise<HttpReply> => {
    const a = await auth.authorize(req, scope);
    if (!a.ok) return a.error;
    const reply = await handler(req, a.value.principal);
    reply.headers = { ...a.value.headers, ...reply.headers };
    return reply;
  };
}
