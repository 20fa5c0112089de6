import { columns, minuteOf, timeRollups, type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';
import { watchMs } from '../watch-time/pipeline.js';

/**
 * Rendition buckets by bitrate (kbps): [0, 500), [500, 1000), … doubling up to [16000, ∞), each about one rung of a
 * usual ladder (240p to 4K). Bucket 0 holds the watch time whose bitrate no event said.
 */
export const bucketEdges = [500, 1000, 2000, 4000, 8000, 16_000] as const;

/** The bucket of a bitrate: 1 to 7 by `bucketEdges`, or 0 for none known. */
export function bucketOf(kbps: number | null): number {
  if (kbps === null) return 0;
  let b = 1;
  while (b <= bucketEdges.length && kbps >= bucketEdges[b - 1]!) b++;
  return b;
}

/**
 * Watch milliseconds per minute (of the segment's end, as watch time), session region, device and rendition bucket,
 * and Σ bitrate × ms over those with a known bitrate, for a time-weighted mean (docs/metrics.md "Bitrate"). Float64:
 * each product is a whole number far below 2^53, so sums and retractions stay exact, while an Int64 sum over a big
 * region and a quarter could pass 2^63.
 */
export const bitrateMinutes = {
  name: 'bitrate_minutes',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
    ['region', 'LowCardinality(String)'],
    ['device', 'LowCardinality(String)'],
    ['bucket', 'UInt8'],
  ],
  values: [
    ['watch_ms', 'Int64'],
    ['kbps_ms', 'Float64'],
  ],
  projections: timeRollups(['region', 'device', 'bucket'], ['watch_ms', 'kbps_ms']),
} as const satisfies TableSpec;

export const bitrateColumns = columns(bitrateMinutes);

// Filled anew for each segment (the emitter copies what it keeps).
const key: [tenant: string, ts: number, region: string, device: string, bucket: number] = ['', 0, '', '', 0];
const values = [0, 0];

export const bitrate: Pipeline = {
  name: 'bitrate',
  tables: [bitrateMinutes],
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms === 0) return;
    key[0] = attrs.tenant;
    key[1] = minuteOf(seg.to!);
    key[2] = attrs.region;
    key[3] = attrs.device;
    key[4] = bucketOf(seg.bitrate_kbps);
    values[0] = sign * ms;
    values[1] = seg.bitrate_kbps === null ? 0 : sign * ms * seg.bitrate_kbps;
    out.add(bitrateMinutes, key, values);
  },
};
