import { columns, minuteOf, type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';
import { isWatching, State } from '../../src/aggregate/session.js';

/** Watch and rebuffering milliseconds per tenant and minute (of e2: docs/metrics.md "Watch time and QoS"). */
export const watchTimeMinutes = {
  name: 'watch_time_minutes',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
  ],
  values: [
    ['watch_ms', 'Int64'],
    ['rebuffer_ms', 'Int64'],
  ],
} as const satisfies TableSpec;

export const watchTimeColumns = columns(watchTimeMinutes);

/** A gap between two events counts for at most 30 s of watch time. */
export const gapCapMs = 30_000;

/** The watch time of a segment (0 unless the session was watching and another event followed). */
export function watchMs(seg: { from: number; to: number | null; state: number }): number {
  if (seg.to === null || !isWatching(seg.state)) return 0;
  return Math.min(seg.to - seg.from, gapCapMs);
}

// Filled anew for each segment (the emitter copies what it keeps).
const key: [string, number] = ['', 0];
const values = [0, 0];

export const watchTime: Pipeline = {
  name: 'watch-time',
  tables: [watchTimeMinutes],
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms === 0) return;
    key[0] = attrs.tenant;
    key[1] = minuteOf(seg.to!);
    values[0] = sign * ms;
    values[1] = seg.state === State.rebuffering ? sign * ms : 0;
    out.add(watchTimeMinutes, key, values);
  },
};
