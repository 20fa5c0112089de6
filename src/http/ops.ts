import { registry } from '../metrics.js';
import { replyError } from './server.js';
import type { Route } from './types.js';

export interface ReadinessCheck {
  name: string;
  ready(): boolean;
}

/** /healthz, /readyz and /metrics: served by every listener (CONTRACT §4). */
export function opsRoutes(checks: () => readonly ReadinessCheck[]): Route[] {
  return [
    { method: 'GET', path: '/healthz', handler: () => ({ status: 200, body: { status: 'ok' } }) },
    {
      method: 'GET',
      path: '/readyz',
      handler(req) {
        const results = Object.fromEntries(checks().map((c) => [c.name, c.ready()]));
        if (Object.values(results).every(Boolean)) return { status: 200, body: { status: 'ready', checks: results } };
        const down = Object.keys(results).filter((k) => !results[k]);
        return replyError(req, 'not_ready', `Not ready: ${down.join(', ')} down`, down.map((name) => ({ check: name })));
      },
    },
    {
      method: 'GET',
      path: '/metrics',
      async handler() {
        return { status: 200, headers: { 'content-type': registry.contentType }, body: await registry.metrics() };
      },
    },
  ];
}
