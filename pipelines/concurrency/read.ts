import type { ClickHouseClient } from '@clickhouse/client';
import { inRange, rangeParams, select, type Range } from '../../src/store/queries/range.js';
import type { ConcurrencySeries, Interval } from './answer.js';
import { concurrencyColumns as c, concurrencySeconds } from './pipeline.js';

// Each second's count is the sum of its rows. FINAL sums them while merging the parts, which are sorted by (tenant,
// ts), rather than hashing every second: 7 days (604,800 seconds) 75 → 50 ms at 100M. Dropping zero rows before or
// after the sum gives the same points, so the answer does not depend on where ClickHouse applies `sessions != 0`.
const perSecond = `SELECT toUnixTimestamp(${c.ts}) AS s, ${c.sessions} AS v FROM ${concurrencySeconds.name} FINAL
  WHERE ${c.tenant} = {tenant:String} AND ${inRange(c.ts)} AND ${c.sessions} != 0`;

/** docs/metrics.md "Concurrency": each point the maximum of its whole seconds; the first second of the peak. */
export async function concurrencySeries(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  intervalMinutes: Interval,
): Promise<ConcurrencySeries> {
  const step = intervalMinutes * 60;
  const params = { ...rangeParams(tenant, range), step };
  // One pass over the seconds gives each point its maximum and the first second that reaches it; the peak is then the
  // largest point, the earliest when several tie.
  const buckets = await select<{ p: string; value: string; at: string }>(
    client,
    `SELECT intDiv(s, {step:UInt32}) * {step:UInt32} AS p, max(v) AS value, argMax(s, (v, -toInt64(s))) AS at FROM (${perSecond}) GROUP BY p ORDER BY p`,
    params,
  );
  const byPoint = new Map(buckets.map((b) => [Number(b.p), Number(b.value)]));
  const points: ConcurrencySeries['points'] = [];
  const fromS = range.from / 1000;
  const toS = range.to / 1000;
  for (let p = Math.floor(fromS / step) * step; p < toS; p += step) {
    points.push({ ts: new Date(p * 1000).toISOString(), value: Math.max(0, byPoint.get(p) ?? 0) });
  }
  let top: (typeof buckets)[number] | undefined;
  for (const b of buckets) if (Number(b.value) > Number(top?.value ?? 0)) top = b;
  const peak = top ? Number(top.value) : 0;
  return {
    interval_minutes: intervalMinutes,
    points,
    peak,
    peak_at: new Date(top ? Number(top.at) * 1000 : range.from).toISOString(),
  };
}
