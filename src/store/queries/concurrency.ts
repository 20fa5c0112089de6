import type { ClickHouseClient } from '@clickhouse/client';
import { inRange, rangeParams, select, type Range } from './range.js';
import type { ConcurrencySeries } from './answers.js';

const perSecond = `SELECT toUnixTimestamp(ts) AS s, sum(sessions) AS v FROM concurrency_seconds
  WHERE tenant = {tenant:String} AND ${inRange()} GROUP BY ts HAVING v != 0`;

/** docs/metrics.md "Concurrency": each point the maximum of its whole seconds; the first second of the peak. */
export async function concurrencySeries(client: ClickHouseClient, tenant: string, range: Range, intervalMinutes: number): Promise<ConcurrencySeries> {
  const step = intervalMinutes * 60;
  const params = { ...rangeParams(tenant, range), step };
  const [buckets, peaks] = await Promise.all([
    select<{ p: string; value: string }>(client, `SELECT intDiv(s, {step:UInt32}) * {step:UInt32} AS p, max(v) AS value FROM (${perSecond}) GROUP BY p`, params),
    select<{ s: string; v: string }>(client, `SELECT s, v FROM (${perSecond}) ORDER BY v DESC, s ASC LIMIT 1`, params),
  ]);
  const byPoint = new Map(buckets.map((b) => [Number(b.p), Number(b.value)]));
  const points: ConcurrencySeries['points'] = [];
  const fromS = range.from / 1000;
  const toS = range.to / 1000;
  for (let p = Math.floor(fromS / step) * step; p < toS; p += step) {
    points.push({ ts: new Date(p * 1000).toISOString(), value: Math.max(0, byPoint.get(p) ?? 0) });
  }
  const top = peaks[0];
  const peak = top && Number(top.v) > 0 ? Number(top.v) : 0;
  return { interval_minutes: intervalMinutes, points, peak, peak_at: new Date(peak > 0 ? Number(top!.s) * 1000 : range.from).toISOString() };
}
