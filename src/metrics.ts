import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One registry per process: every role registers here and every listener's /metrics serves it. */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'darshak_process_' });

let metricsSource: () => Promise<string> = () => registry.metrics();

/** What /metrics serves: this process's registry, or (a child of the box, cli/box.ts) the whole box's. */
export const metricsText = (): Promise<string> => metricsSource();

export function setMetricsSource(source: () => Promise<string>): void {
  metricsSource = source;
}

export const httpEngineInfo = new Gauge({
  name: 'darshak_http_engine_info',
  help: 'HTTP engine serving each listener (1 = in use)',
  labelNames: ['listener', 'engine'] as const,
  registers: [registry],
});

export const httpRequests = new Counter({
  name: 'darshak_http_requests_total',
  help: 'HTTP requests answered',
  labelNames: ['listener', 'route', 'method', 'status'] as const,
  registers: [registry],
});

export const httpDuration = new Histogram({
  name: 'darshak_http_request_duration_seconds',
  help: 'Time from request to answer',
  labelNames: ['listener', 'route'] as const,
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});
