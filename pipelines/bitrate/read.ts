import type { ClickHouseClient } from '@clickhouse/client';
import type { ListEndpoint } from '../../src/metric/endpoint.js';
import { hours, sumsBy, type Range } from '../../src/store/queries/range.js';
import { bitrateItemSchema, type BitrateItem, type BucketName, type Rendition } from './answer.js';
import { bitrateColumns as c, bitrateMinutes, bucketEdges } from './pipeline.js';

/** A bucket's name and bounds, by its number (pipeline.ts `bucketOf`). */
function rendition(bucket: number): Pick<Rendition, 'bucket' | 'min_kbps' | 'max_kbps'> {
  if (bucket === 0) return { bucket: 'unknown', min_kbps: null, max_kbps: null };
  const min = bucket === 1 ? 0 : bucketEdges[bucket - 2]!;
  const max = bucketEdges[bucket - 1] ?? null;
  return { bucket: (max === null ? `${min}+` : `${min}-${max}`) as BucketName, min_kbps: min, max_kbps: max };
}

/** A region and device's sums: watch ms, Σ bitrate × ms, and watch ms per bucket. */
interface Group {
  region: string;
  device: string;
  ms: number;
  kbpsMs: number;
  byBucket: Map<number, number>;
}

/** docs/metrics.md "Bitrate": watch time per rendition bucket, per session region and device. */
export async function bitrateByRegionDevice(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
): Promise<BitrateItem[]> {
  const rows = await sumsBy(
    client,
    bitrateMinutes.name,
    [c.region, c.device, c.bucket],
    [c.watch_ms, c.kbps_ms],
    tenant,
    range,
  );
  const groups = new Map<string, Group>();
  for (const { keys, sums } of rows) {
    const [ms, kbpsMs] = sums as [number, number];
    // A key whose watch time was all retracted sums to 0; every other sum is positive.
    if (ms === 0) continue;
    const region = String(keys[0]) || 'unknown';
    const device = String(keys[1]) || 'unknown';
    const id = JSON.stringify([region, device]);
    let g = groups.get(id);
    if (!g) groups.set(id, (g = { region, device, ms: 0, kbpsMs: 0, byBucket: new Map() }));
    const bucket = Number(keys[2]);
    g.ms += ms;
    g.kbpsMs += kbpsMs;
    g.byBucket.set(bucket, (g.byBucket.get(bucket) ?? 0) + ms);
  }
  const items: BitrateItem[] = [];
  for (const g of groups.values()) {
    const known = g.ms - (g.byBucket.get(0) ?? 0);
    const order = [...g.byBucket.keys()].sort((a, b) => (a || 99) - (b || 99));
    items.push({
      region: g.region,
      device: g.device,
      watch_hours: hours(g.ms),
      avg_bitrate_kbps: known === 0 ? null : g.kbpsMs / known,
      renditions: order.map((b) => {
        const ms = g.byBucket.get(b)!;
        return { ...rendition(b), watch_hours: hours(ms), share_pct: (ms / g.ms) * 100 };
      }),
    });
  }
  return items.sort(
    (a, b) =>
      b.watch_hours - a.watch_hours ||
      (a.region < b.region ? -1 : a.region > b.region ? 1 : a.device < b.device ? -1 : a.device > b.device ? 1 : 0),
  );
}

export const bitrateEndpoint: ListEndpoint<BitrateItem> = {
  path: '/v1/analytics/bitrate',
  operationId: 'getBitrate',
  summary: 'Watch time by rendition bitrate, per region and device',
  description:
    'Watch time per rendition bucket and its time-weighted mean bitrate, per session region and device over the range (docs/metrics.md "Bitrate"), ordered by watch time.',
  itemName: 'BitrateItem',
  items: 'Region and device pairs.',
  schema: bitrateItemSchema,
  list: bitrateByRegionDevice,
};
