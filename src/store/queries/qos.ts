import type { ClickHouseClient } from '@clickhouse/client';
import { startupPercentile } from '../../../pipelines/qos.js';
import type { Fields } from '../../metric/pipeline.js';
import { hours, inRange, rangeParams, select, type Range } from './range.js';
import type { QosItem } from './answers.js';

interface Totals {
  region: string;
  w: string;
  rb: string;
  st: string;
  fa: string;
  su: string;
}

/** docs/metrics.md "QoS by region": rebuffer rate, startup percentiles and error rate per session region. */
export async function qosByRegion(client: ClickHouseClient, tenant: string, range: Range): Promise<QosItem[]> {
  const params = rangeParams(tenant, range);
  const where = `tenant = {tenant:String} AND ${inRange()}`;
  const [totals, histogram] = await Promise.all([
    select<Totals>(
      client,
      `SELECT region, sum(watch_ms) AS w, sum(rebuffer_ms) AS rb, sum(sessions_started) AS st, sum(fatal_sessions) AS fa, sum(startups) AS su
       FROM qos_minutes WHERE ${where} GROUP BY region HAVING w != 0 OR st != 0 OR fa != 0 OR su != 0`,
      params,
    ),
    select<{ region: string; bucket: number; n: string }>(
      client,
      `SELECT region, bucket, sum(startups) AS n FROM qos_startup_histogram WHERE ${where} GROUP BY region, bucket HAVING n != 0`,
      params,
    ),
  ]);
  const buckets = new Map<string, Fields>();
  for (const h of histogram) {
    let f = buckets.get(h.region);
    if (!f) buckets.set(h.region, (f = {}));
    f[`b${h.bucket}`] = Number(h.n);
  }
  return totals
    .map((r) => {
      const [watch, rebuffer, started, fatal] = [Number(r.w), Number(r.rb), Number(r.st), Number(r.fa)];
      const startups = buckets.get(r.region) ?? {};
      return {
        region: r.region === '' ? 'unknown' : r.region,
        watch_hours: hours(watch),
        rebuffer_rate: watch === 0 ? 0 : (rebuffer / watch) * 100,
        startups: Number(r.su),
        startup_p50_ms: startupPercentile(startups, 0.5),
        startup_p95_ms: startupPercentile(startups, 0.95),
        sessions_started: started,
        fatal_sessions: fatal,
        error_rate: started === 0 ? 0 : (fatal / started) * 100,
      };
    })
    .sort((a, b) => b.watch_hours - a.watch_hours || (a.region < b.region ? -1 : 1));
}
