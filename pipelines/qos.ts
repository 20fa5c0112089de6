import { minuteOf, type Pipeline, type SessionAttrs, type TableSpec } from '../src/aggregate/pipeline.js';
import { State } from '../src/aggregate/session.js';
import { watchMs } from './watch-time.js';

const dims = [
  ['tenant', 'LowCardinality(String)'],
  ['ts', 'DateTime'],
  ['region', 'LowCardinality(String)'],
  ['pop', 'LowCardinality(String)'],
] as const;

/** Quality of experience per minute, region and pop: the inputs of rebuffer rate, startup time and error rate. */
export const qosMinutes: TableSpec = {
  name: 'qos_minutes',
  engine: 'sum',
  key: dims,
  values: [
    ['watch_ms', 'Int64'],
    ['rebuffer_ms', 'Int64'],
    ['sessions_started', 'Int64'],
    ['fatal_sessions', 'Int64'],
    ['startups', 'Int64'],
    ['startup_ms', 'Int64'],
  ],
};

/** Startup times as a histogram with 5% wide buckets: percentiles to within 5%, summable across any grouping. */
export const qosStartupHistogram: TableSpec = {
  name: 'qos_startup_histogram',
  engine: 'sum',
  key: [...dims, ['bucket', 'UInt16']],
  values: [['startups', 'Int64']],
};

export const bucketGrowth = 1.05;

/** Bucket b holds startup times in (1.05^(b-1), 1.05^b] ms; bucket 0 holds up to 1 ms. */
export function startupBucket(ms: number): number {
  return ms <= 1 ? 0 : Math.ceil(Math.log(ms) / Math.log(bucketGrowth));
}

const key = (a: SessionAttrs, ms: number): [string, number, string, string] => [a.tenant, minuteOf(ms), a.region, a.pop];

export const qos: Pipeline = {
  name: 'qos',
  tables: [qosMinutes, qosStartupHistogram],
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms === 0) return;
    out.add(qosMinutes, key(attrs, seg.to!), [sign * ms, seg.state === State.rebuffering ? sign * ms : 0, 0, 0, 0, 0]);
  },
  session(a, sign, out) {
    if (a.started_at !== null) out.add(qosMinutes, key(a, a.started_at), [0, 0, sign, 0, 0, 0]);
    if (a.fatal_at !== null) out.add(qosMinutes, key(a, a.fatal_at), [0, 0, 0, sign, 0, 0]);
    if (a.startup_ms !== null && a.startup_at !== null) {
      out.add(qosMinutes, key(a, a.startup_at), [0, 0, 0, 0, sign, sign * a.startup_ms]);
      out.add(qosStartupHistogram, [...key(a, a.startup_at), startupBucket(a.startup_ms)], [sign]);
    }
  },
};
