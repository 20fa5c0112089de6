import { randomBytes } from 'node:crypto';
import type { ControlPlane } from '../control/control-plane.js';
import { environments, type Environment } from '../control/records.js';
import { clientAddress } from '../http/address.js';
import { replyError } from '../http/server.js';
import type { HttpReply, HttpRequest, Route } from '../http/types.js';
import { guarded, type Authenticator, type Scope } from './auth.js';
import { controlReply, page, readJson } from './body.js';
import type { Login, LoginRefusal } from './login.js';
import type { RevokedTokens } from './revoked-tokens.js';
import { serviceTokenSeconds, type Principal, type TokenService } from './tokens.js';

/** Scopes a service account may hold: never settings:write, so a script's token cannot mint more tokens. */
export const serviceAccountScopes: readonly Scope[] = ['analytics:read', 'alerts:write', 'keys:manage'];

export interface AccountDeps {
  auth: Authenticator;
  control: ControlPlane;
  login: Login;
  tokens: TokenService;
  revoked: RevokedTokens;
  /** `last_used_at` of the API keys, by id. */
  keysLastUsed: () => Promise<Map<string, string>>;
  /** TRUST_PROXY: a client's address is the first hop of X-Forwarded-For. */
  trustProxy: boolean;
}

/** Login, the public keys, service accounts and API keys. */
export function accountRoutes({
  auth,
  control,
  login,
  tokens,
  revoked,
  keysLastUsed,
  trustProxy,
}: AccountDeps): Route[] {
  /** The answer to a login or a password change that did not succeed. */
  const refused = (req: HttpRequest, out: LoginRefusal): HttpReply => {
    if (out.kind === 'too_many_attempts') {
      const reply = replyError(req, 'too_many_attempts', `Too many failed logins; retry in ${out.retryAfterSeconds} s`);
      reply.headers = { 'Retry-After': String(out.retryAfterSeconds) };
      return reply;
    }
    if (out.kind === 'tenant_inactive')
      return replyError(
        req,
        'tenant_inactive',
        'This tenant is inactive: its users cannot sign in until it is made active',
      );
    return replyError(req, 'invalid_credentials');
  };
  /** Any user's token, whatever its scopes; a service account's is told how it is revoked instead. */
  const asUser = (handler: (req: HttpRequest, principal: Principal) => Promise<HttpReply>) =>
    guarded(auth, null, (req, principal) =>
      principal.role === 'service_account'
        ? Promise.resolve(
            replyError(
              req,
              'invalid_request',
              "A service account's token is revoked with DELETE /v1/service-accounts/{id}",
            ),
          )
        : handler(req, principal),
    );
  return [
    {
      method: 'POST',
      path: '/v1/auth/login',
      async handler(req) {
        const body = await readJson(req, {
          email: { type: 'string', required: true },
          password: { type: 'string', required: true },
        });
        if (!body.ok) return body.error;
        const { email, password } = body.value;
        // Refused before any work: no account has such an e-mail or password, and scrypt of a huge password is a
        // cheap way to burn our CPU. The quick answer tells nothing about which accounts exist.
        if (email.length > 254 || password.length > 1024) return replyError(req, 'invalid_credentials');
        const out = await login.login(email, password, clientAddress(req, trustProxy));
        if (out.ok) return { status: 200, headers: { 'Cache-Control': 'no-store' }, body: out.value };
        return refused(req, out.error);
      },
    },
    {
      method: 'POST',
      path: '/v1/auth/logout',
      handler: asUser(async (_req, principal) => {
        await revoked.revoke(principal.jti, principal.exp);
        return { status: 204 };
      }),
    },
    {
      method: 'POST',
      path: '/v1/auth/logout-everywhere',
      handler: asUser(async (_req, principal) => {
        await control.users.signOutEverywhere(Number(principal.sub));
        return { status: 204 };
      }),
    },
    {
      method: 'POST',
      path: '/v1/auth/password',
      handler: asUser(async (req, principal) => {
        const body = await readJson(req, {
          current_password: { type: 'string', required: true },
          new_password: { type: 'string', required: true },
        });
        if (!body.ok) return body.error;
        const { current_password: current, new_password: next } = body.value;
        if (next.length < 8 || next.length > 1024)
          return replyError(req, 'invalid_request', 'new_password must be 8 to 1024 characters', [
            { field: 'new_password' },
          ]);
        if (current.length > 1024) return replyError(req, 'invalid_credentials');
        const out = await login.changePassword(Number(principal.sub), current, next, clientAddress(req, trustProxy));
        if (out.ok) return { status: 200, headers: { 'Cache-Control': 'no-store' }, body: out.value };
        return refused(req, out.error);
      }),
    },
    {
      method: 'GET',
      path: '/.well-known/jwks.json',
      handler: () => ({ status: 200, headers: { 'Cache-Control': 'public, max-age=300' }, body: tokens.jwks() }),
    },
    {
      method: 'POST',
      path: '/v1/service-accounts',
      handler: guarded(auth, 'settings:write', async (req, principal) => {
        const body = await readJson(req, {
          name: { type: 'string', required: true },
          scopes: { type: 'string[]', required: true },
        });
        if (!body.ok) return body.error;
        const scopes = [...new Set(body.value.scopes)];
        const bad = scopes.find((s) => !(serviceAccountScopes as readonly string[]).includes(s));
        if (scopes.length === 0 || bad !== undefined) {
          return replyError(
            req,
            'invalid_request',
            `scopes must be a non-empty list of ${serviceAccountScopes.join(', ')}`,
            [{ field: 'scopes' }],
          );
        }
        return controlReply(req, async () => {
          const id = `sa_${randomBytes(10).toString('hex')}`;
          const { token, expiresAt } = await tokens.issue({
            sub: id,
            jti: id,
            tenant: principal.tenant,
            role: 'service_account',
            scopes,
            lifetimeSeconds: serviceTokenSeconds,
          });
          const sa = await control.serviceAccounts.create({
            id,
            tenant: principal.tenant,
            name: body.value.name,
            scopes,
            created_by: principal.sub,
            expires_at: expiresAt.toISOString(),
          });
          return {
            status: 201,
            headers: { 'Cache-Control': 'no-store' },
            body: { id, name: sa.name, scopes, token, expires_at: sa.expires_at, created_at: sa.created_at },
          };
        });
      }),
    },
    {
      method: 'GET',
      path: '/v1/service-accounts',
      handler: guarded(auth, 'settings:write', async (req, principal) =>
        controlReply(req, async () => {
          const list = await control.serviceAccounts.list(principal.tenant);
          return page(
            list.map(({ id, name, scopes, created_at, expires_at, revoked_at }) => ({
              id,
              name,
              scopes,
              created_at,
              expires_at,
              revoked_at,
            })),
          );
        }),
      ),
    },
    {
      method: 'DELETE',
      path: '/v1/service-accounts/{id}',
      handler: guarded(auth, 'settings:write', async (req, principal) =>
        controlReply(req, async () => ({
          status: 200,
          body: await control.serviceAccounts.revoke(principal.tenant, req.params.id ?? ''),
        })),
      ),
    },
    {
      method: 'POST',
      path: '/v1/api-keys',
      handler: guarded(auth, 'keys:manage', async (req, principal) => {
        const body = await readJson(req, {
          name: { type: 'string', required: true },
          environment: { type: 'string', required: true },
        });
        if (!body.ok) return body.error;
        const environment = body.value.environment as Environment;
        if (!environments.includes(environment)) {
          return replyError(req, 'invalid_request', `environment must be one of ${environments.join(', ')}`, [
            { field: 'environment' },
          ]);
        }
        return controlReply(req, async () => ({
          status: 201,
          headers: { 'Cache-Control': 'no-store' },
          body: await control.apiKeys.create({ tenant: principal.tenant, name: body.value.name, environment }),
        }));
      }),
    },
    {
      method: 'GET',
      path: '/v1/api-keys',
      handler: guarded(auth, 'keys:manage', async (req, principal) =>
        controlReply(req, async () => {
          const [keys, used] = await Promise.all([control.apiKeys.list(principal.tenant), keysLastUsed()]);
          return page(keys.map((k) => ({ ...k, last_used_at: used.get(k.id) ?? null })));
        }),
      ),
    },
    {
      method: 'DELETE',
      path: '/v1/api-keys/{id}',
      handler: guarded(auth, 'keys:manage', async (req, principal) =>
        controlReply(req, async () => ({
          status: 200,
          body: await control.apiKeys.revoke(principal.tenant, req.params.id ?? ''),
        })),
      ),
    },
    {
      // The seed writes revocation as DELETE /v1/api-keys; the id then travels in the body.
      method: 'DELETE',
      path: '/v1/api-keys',
      handler: guarded(auth, 'keys:manage', async (req, principal) => {
        const body = await readJson(req, { id: { type: 'string', required: true } });
        if (!body.ok) return body.error;
        return controlReply(req, async () => ({
          status: 200,
          body: await control.apiKeys.revoke(principal.tenant, body.value.id),
        }));
      }),
    },
  ];
}
