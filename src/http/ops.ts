import { timingSafeEqual } from 'node:crypto';
import { metricsText, registry } from '../metrics.js';
import { replyError } from './server.js';
import type { Route } from './types.js';

export interface ReadinessCheck {
  name: string;
  ready(): boolean;
}

/**
 * /healthz, /readyz and /metrics: served by every listener (CONTRACT §4). With `opsToken`, the last two answer only
 * its bearer: what is connected and every internal counter are not for the public internet.
 */
export function opsRoutes(checks: () => readonly ReadinessCheck[], opsToken: string): Route[] {
  const expected = Buffer.from(`Bearer ${opsToken}`);
  const operator = (handler: Route['handler']): Route['handler'] =>
    opsToken === ''
      ? handler
      : (req) => {
          const given = Buffer.from(req.header('authorization') ?? '');
          if (given.length === expected.length && timingSafeEqual(given, expected)) return handler(req);
          const reply = replyError(
            req,
            'unauthorized',
            "This endpoint needs the operators' token (OPS_TOKEN) as a Bearer token",
          );
          reply.headers = { 'WWW-Authenticate': 'Bearer realm="darshak-ops"' };
          return reply;
        };
  return [
    { method: 'GET', path: '/healthz', handler: () => ({ status: 200, body: { status: 'ok' } }) },
    {
      method: 'GET',
      path: '/readyz',
      handler: operator((req) => {
        const results = Object.fromEntries(checks().map((c) => [c.name, c.ready()]));
        if (Object.values(results).every(Boolean)) return { status: 200, body: { status: 'ready', checks: results } };
        const down = Object.keys(results).filter((k) => !results[k]);
        return replyError(
          req,
          'not_ready',
          `Not ready: ${down.join(', ')} down`,
          down.map((name) => ({ check: name })),
        );
      }),
    },
    {
      method: 'GET',
      path: '/metrics',
      handler: operator(async () => ({
        status: 200,
        headers: { 'content-type': registry.contentType },
        body: await metricsText(),
      })),
    },
  ];
}
