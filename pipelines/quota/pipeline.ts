import { minuteOf, type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';
import type { Finding } from '../../src/metric/detector.js';

/** Stored (de-duplicated) events per tenant and minute of arrival: monthly usage is a sum of these. */
export const quotaMinutes: TableSpec = {
  name: 'quota_minutes',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
  ],
  values: [['events', 'Int64']],
};

// Filled anew for each event (the emitter copies what it keeps).
const key: [string, number] = ['', 0];
const one = [1];

export const quota: Pipeline = {
  name: 'quota',
  tables: [quotaMinutes],
  event(e, out) {
    key[0] = e.tenant;
    key[1] = minuteOf(e.received_at);
    out.add(quotaMinutes, key, one);
  },
};

/**
 * Quota alerts read ingest's shared monthly counter (what limits ingest), not a signal: the alerts role compares it
 * with each tenant's quota every second and raises each level once per UTC month.
 */
export const quotaLevels = [
  { category: 'ingest.quota_80pct', share: 0.8, severity: 'warning' },
  { category: 'ingest.quota_exceeded', share: 1, severity: 'critical' },
] as const;

export function quotaFinding(
  level: (typeof quotaLevels)[number],
  used: number,
  quota: number,
  period: string,
): Finding {
  const share = level.share * 100;
  return {
    severity: level.severity,
    title: level.share < 1 ? `${share} % of the monthly event quota used` : 'Monthly event quota exceeded',
    description: `${used} of ${quota} events accepted in ${period}.`,
    data: { severity: level.severity, used, quota, period },
  };
}
