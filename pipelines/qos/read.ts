import type { ClickHouseClient } from '@clickhouse/client';
import type { ListEndpoint } from '../../src/metric/endpoint.js';
import type { Fields } from '../../src/metric/pipeline.js';
import { hours, inRange, rangeParams, select, type Range } from '../../src/store/queries/range.js';
import { qosItemSchema, type QosItem } from './answer.js';
import {
  histogramColumns as h,
  qosColumns as c,
  qosMinutes,
  qosStartupHistogram,
  startupPercentile,
} from './pipeline.js';

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
  const where = `${c.tenant} = {tenant:String} AND ${inRange(c.ts)}`;
  const [totals, histogram] = await Promise.all([
    select<Totals>(
      client,
      `SELECT ${c.region} AS region, sum(${c.watch_ms}) AS w, sum(${c.rebuffer_ms}) AS rb, sum(${c.sessions_started}) AS st,
         sum(${c.fatal_sessions}) AS fa, sum(${c.startups}) AS su
       FROM ${qosMinutes.name} WHERE ${where} GROUP BY region HAVING w != 0 OR st != 0 OR fa != 0 OR su != 0`,
      params,
    ),
    select<{ region: string; bucket: number; n: string }>(
      client,
      `SELECT ${h.region} AS region, ${h.bucket} AS bucket, sum(${h.startups}) AS n FROM ${qosStartupHistogram.name}
       WHERE ${where} GROUP BY region, bucket HAVING n != 0`,
      params,
    ),
  ]);
  const buckets = new Map<string, Fields>();
  for (const b of histogram) {
    let f = buckets.get(b.region);
    if (!f) buckets.set(b.region, (f = {}));
    f[`b${b.bucket}`] = Number(b.n);
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

export const qosEndpoint: ListEndpoint<QosItem> = {
  path: '/v1/analytics/qos',
  operationId: 'getQos',
  summary: 'Quality of experience by region',
  description:
    'Rebuffer rate, startup time p50/p95 and error rate per session region over the range (docs/metrics.md "QoS by region"), ordered by watch time.',
  itemName: 'QosItem',
  items: 'Regions.',
  schema: qosItemSchema,
  list: qosByRegion,
};
