import type { ClickHouseClient } from '@clickhouse/client';
import { concurrencySeries } from '../../pipelines/concurrency/read.js';
import { endpoints } from '../../pipelines/endpoints.js';
import { replyError } from '../http/server.js';
import type { HttpReply, HttpRequest, Route } from '../http/types.js';
import { acknowledgeAlert, listAlerts, severities } from '../store/alerts.js';
import { devices, geo, overview, resolveRange, topContent, type RangeName } from '../store/queries/index.js';
import { guarded, type Authenticator, type Scope } from './auth.js';
import { page, pageReply } from './body.js';
import {
  intervalParam,
  limitParam,
  offsetParam,
  parseParams,
  rangeParam,
  type ParamSpec,
  type Params,
} from './params.js';
import type { Principal } from './tokens.js';

type Specs = Record<string, ParamSpec>;

/** Parse the query by `specs`, then run `answer`; a bad parameter is a 400 naming it. */
function withParams<S extends Specs>(
  auth: Authenticator,
  scope: Scope,
  specs: S,
  answer: (params: Params<S>, principal: Principal, req: HttpRequest) => Promise<HttpReply>,
) {
  return guarded(auth, scope, async (req, principal) => {
    const parsed = parseParams(req.query, specs);
    if (!parsed.ok)
      return replyError(req, 'invalid_parameter', parsed.error.message, [{ parameter: parsed.error.parameter }]);
    return answer(parsed.value, principal, req);
  });
}

const list = { range: rangeParam, limit: limitParam, offset: offsetParam } as const;

/** The analytics endpoints: every query takes the tenant from the token, never from the request. */
export function analyticsRoutes(auth: Authenticator, client: ClickHouseClient, now: () => number = Date.now): Route[] {
  const range = (name: string) => resolveRange(name as RangeName, now());
  return [
    {
      method: 'GET',
      path: '/v1/analytics/overview',
      handler: withParams(auth, 'analytics:read', { range: rangeParam }, async (p, who) => ({
        status: 200,
        body: await overview(client, who.tenant, range(p.range)),
      })),
    },
    {
      method: 'GET',
      path: '/v1/analytics/concurrency',
      handler: withParams(
        auth,
        'analytics:read',
        { range: rangeParam, interval: intervalParam },
        async (p, who, req) => {
          if (p.range !== '24h' && p.interval < 15) {
            return replyError(
              req,
              'invalid_parameter',
              `interval must be 15 or 60 for range ${p.range} (1 and 5 are for 24h)`,
              [{ parameter: 'interval' }],
            );
          }
          return { status: 200, body: await concurrencySeries(client, who.tenant, range(p.range), p.interval) };
        },
      ),
    },
    {
      method: 'GET',
      path: '/v1/analytics/top-content',
      handler: withParams(auth, 'analytics:read', list, async (p, who) =>
        pageReply(await topContent(client, who.tenant, range(p.range), p.limit, p.offset)),
      ),
    },
    {
      method: 'GET',
      path: '/v1/analytics/geo',
      handler: withParams(auth, 'analytics:read', list, async (p, who) =>
        page(await geo(client, who.tenant, range(p.range)), p.limit, p.offset),
      ),
    },
    {
      method: 'GET',
      path: '/v1/analytics/devices',
      handler: withParams(auth, 'analytics:read', { range: rangeParam }, async (p, who) =>
        page(await devices(client, who.tenant, range(p.range))),
      ),
    },
    ...endpoints.map((e): Route => ({
      method: 'GET',
      path: e.path,
      handler: withParams(auth, 'analytics:read', list, async (p, who) =>
        page(await e.list(client, who.tenant, range(p.range)), p.limit, p.offset),
      ),
    })),
    {
      method: 'GET',
      path: '/v1/analytics/alerts',
      handler: withParams(
        auth,
        'analytics:read',
        {
          limit: limitParam,
          offset: offsetParam,
          acknowledged: { kind: 'bool' },
          severity: { kind: 'enum', values: severities },
        },
        async (p, who) => {
          const { alerts, total } = await listAlerts(client, who.tenant, p);
          return { status: 200, headers: { 'X-Total-Count': String(total) }, body: alerts };
        },
      ),
    },
    {
      method: 'POST',
      path: '/v1/alerts/{id}/acknowledge',
      handler: withParams(auth, 'alerts:write', {}, async (_p, who, req) => {
        const id = req.params.id ?? '';
        const n = /^[1-9]\d{0,15}$/.test(id) ? Number(id) : NaN;
        const alert = Number.isSafeInteger(n) ? await acknowledgeAlert(client, who.tenant, n) : null;
        return alert
          ? { status: 200, body: alert }
          : replyError(req, 'not_found', `alert ${JSON.stringify(id.slice(0, 64))} does not exist`);
      }),
    },
  ];
}
