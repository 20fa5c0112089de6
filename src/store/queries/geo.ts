import type { ClickHouseClient } from '@clickhouse/client';
import { hours, inRange, rangeParams, select, type Range } from './range.js';
import type { GeoItem } from './answers.js';
import { viewersIn } from '../../../pipelines/viewers/read.js';
import { qosMinutes } from '../../../pipelines/qos/pipeline.js';

/** docs/metrics.md "Geo": per session region, watch time share and distinct viewers. */
export async function geo(client: ClickHouseClient, tenant: string, range: Range): Promise<GeoItem[]> {
  const params = rangeParams(tenant, range);
  const [watch, viewers] = await Promise.all([
    select<{ region: string; ms: string }>(
      client,
      `SELECT region, sum(watch_ms) AS ms FROM ${qosMinutes.name} WHERE tenant = {tenant:String} AND ${inRange()} GROUP BY region HAVING ms != 0`,
      params,
    ),
    viewersIn(client, tenant, 'region', range),
  ]);
  const items = new Map<string, GeoItem>();
  const item = (region: string): GeoItem => {
    const name = region === '' ? 'unknown' : region;
    let it = items.get(name);
    if (!it) items.set(name, (it = { region: name, watch_hours: 0, viewers: 0, share_pct: 0 }));
    return it;
  };
  let total = 0;
  for (const w of watch) {
    item(w.region).watch_hours = hours(Number(w.ms));
    total += Number(w.ms);
  }
  for (const [region, n] of viewers) item(region).viewers = n;
  for (const w of watch) item(w.region).share_pct = total === 0 ? 0 : (Number(w.ms) / total) * 100;
  return [...items.values()].sort((a, b) => b.watch_hours - a.watch_hours || (a.region < b.region ? -1 : 1));
}
