import { minuteOf, type Fields, type Pipeline, type SessionAttrs, type TableSpec } from '../src/aggregate/pipeline.js';
import { State } from '../src/aggregate/session.js';
import { median, pct, poissonTail, round, severityOf, sumFields, windowFields, type Window, type WindowDetector } from '../src/alerts/detector.js';
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

// Detector signals (docs/alerts.md), per event-time minute:
// - `qos_pop` [tenant, region, pop]: watch_ms, rebuffer_ms; sessions (distinct, with any event in the minute);
//   stalled (distinct, with a rebuffer_start in it).
// - `qos_region` [tenant, region]: starts, fatal (sessions), startups and their histogram (`b<bucket>`), and fatal
//   errors by code (`code:<code>`).
const popKey = (a: SessionAttrs): string[] => [a.tenant, a.region, a.pop];

// What a segment hands the emitter, filled anew for each (the emitter copies what it keeps).
const segmentKey: [string, number, string, string] = ['', 0, '', ''];
const segmentValues = [0, 0, 0, 0, 0, 0];
const segmentPop = ['', '', ''];
const segmentFields = { watch_ms: 0, rebuffer_ms: 0 };
const regionKey = (a: SessionAttrs): string[] => [a.tenant, a.region];

/** Percentile of a startup histogram (fields `b<bucket>`), as the bucket's upper bound in ms. */
export function startupPercentile(f: Fields, p: number): number {
  const buckets = Object.keys(f)
    .filter((k) => k.startsWith('b') && f[k]! > 0)
    .map((k) => [Number(k.slice(1)), f[k]!] as const)
    .sort((a, b) => a[0] - b[0]);
  const n = buckets.reduce((s, [, c]) => s + c, 0);
  let seen = 0;
  for (const [b, c] of buckets) {
    seen += c;
    if (seen >= p * n) return Math.round(bucketGrowth ** b);
  }
  return 0;
}

const minute = 60;

/** The first minute of the window of `span` minutes ending with `w.bucket`, and of the baseline before it. */
const baselineRange = (w: Window, span: number): [number, number] => {
  const end = w.bucket - (span - 1) * minute;
  return [end - w.thresholds.baseline_minutes! * minute, end];
};

/** The window's counts (`window_minutes` ending with `w.bucket`) and its baseline's, firing minutes left out. */
function windowAndBaseline(w: Window): { cur: Fields; base: Fields } {
  const span = w.thresholds.window_minutes!;
  const [from, to] = baselineRange(w, span);
  return { cur: windowFields(w, span), base: sumFields(w, from, to, true) };
}

export const rebufferSpike: WindowDetector = {
  kind: 'window',
  category: 'qos.rebuffer_spike',
  source: 'qos',
  signal: 'qos_pop',
  bucketMinutes: 1,
  historyBuckets: 64,
  running: 2,
  params: {
    ratio: 'the rebuffer rate of the minute is at least this many times the baseline',
    min_points: 'and at least this many percentage points above it',
    min_sessions: 'sessions with an event in the minute, at least',
    baseline_minutes: 'the baseline is the median of the per-minute rates of this many minutes before',
    min_baseline_minutes: 'minutes with watch time the baseline needs, at least',
  },
  evaluate(w) {
    const t = w.thresholds;
    const cur = w.at(w.bucket);
    if (!cur || (cur.sessions ?? 0) < t.min_sessions! || !cur.watch_ms) return null;
    const rate = pct(cur.rebuffer_ms ?? 0, cur.watch_ms);
    const [from, to] = baselineRange(w, 1);
    const rates: number[] = [];
    for (let b = from; b < to; b += minute) {
      const f = w.at(b);
      if (f?.watch_ms && f.watch_ms > 0 && !w.firing(b)) rates.push(pct(f.rebuffer_ms ?? 0, f.watch_ms));
    }
    if (rates.length < t.min_baseline_minutes!) return null;
    const base = median(rates);
    if (rate < t.ratio! * base || rate < base + t.min_points!) return null;
    const [region, pop] = w.key;
    const severity = severityOf(rate, base);
    return {
      severity,
      title: `Rebuffering spike in ${region} / ${pop}`,
      description: `Rebuffer rate ${round(rate)} % against a baseline of ${round(base)} % over ${cur.sessions} sessions.`,
      // Stalled sessions of the minute, or of the minute before when more (this one may have just begun).
      data: { severity, region, pop, current_rate: round(rate), baseline_rate: round(base), affected_sessions: Math.max(cur.stalled ?? 0, w.at(w.bucket - minute)?.stalled ?? 0) },
    };
  },
};

export const startupRegression: WindowDetector = {
  kind: 'window',
  category: 'qos.startup_regression',
  source: 'qos',
  signal: 'qos_region',
  bucketMinutes: 1,
  historyBuckets: 64,
  running: 1,
  params: {
    window_minutes: 'startups of this many minutes are compared',
    ratio: 'their p50 is at least this many times the baseline p50',
    min_increase_ms: 'and at least this many milliseconds more',
    min_starts: 'startups in the window (and in the baseline), at least',
    baseline_minutes: 'the baseline is the startups of this many minutes before the window',
  },
  evaluate(w) {
    const t = w.thresholds;
    const { cur, base } = windowAndBaseline(w);
    if ((cur.startups ?? 0) < t.min_starts! || (base.startups ?? 0) < t.min_starts!) return null;
    const p50 = startupPercentile(cur, 0.5);
    const baseP50 = startupPercentile(base, 0.5);
    if (p50 < t.ratio! * baseP50 || p50 < baseP50 + t.min_increase_ms!) return null;
    const [region] = w.key;
    const severity = severityOf(p50, baseP50);
    return {
      severity,
      title: `Startup time regression in ${region}`,
      description: `Median startup ${p50} ms against a baseline of ${baseP50} ms over ${cur.startups} startups.`,
      data: { severity, region, current_p50_ms: p50, baseline_p50_ms: baseP50, current_p95_ms: startupPercentile(cur, 0.95), affected_sessions: cur.startups },
    };
  },
};

export const errorSpike: WindowDetector = {
  kind: 'window',
  category: 'qos.error_spike',
  source: 'qos',
  signal: 'qos_region',
  bucketMinutes: 1,
  historyBuckets: 64,
  running: 1,
  params: {
    window_minutes: 'sessions started in this many minutes are compared',
    ratio: 'their fatal error rate is at least this many times the baseline',
    min_points: 'and at least this many percentage points above it',
    min_sessions: 'sessions started in the window (and in the baseline), at least',
    min_errors: 'sessions with a fatal error in the window, at least (ours: one error in 25 sessions is not a spike)',
    baseline_minutes: 'the baseline is the sessions of this many minutes before the window',
    max_chance: "and so many fatal sessions would come by chance at the baseline's rate less often than this (a Poisson tail)",
  },
  evaluate(w) {
    const t = w.thresholds;
    const { cur, base } = windowAndBaseline(w);
    const fatal = cur.fatal ?? 0;
    if ((cur.starts ?? 0) < t.min_sessions! || fatal < t.min_errors! || (base.starts ?? 0) < t.min_sessions!) return null;
    const rate = pct(fatal, cur.starts!);
    const baseRate = pct(base.fatal ?? 0, base.starts!);
    if (rate < t.ratio! * baseRate || rate < baseRate + t.min_points!) return null;
    // A handful of errors among a few dozen starts is ordinary noise: measured, it made nearly every false alert of
    // a steady day (bench/RESULTS.md). The baseline rate is smoothed (one error more), as a short baseline may show none.
    const expected = (cur.starts! * ((base.fatal ?? 0) + 1)) / (base.starts! + 1);
    if (poissonTail(fatal, expected) >= t.max_chance!) return null;
    let top = '';
    for (const k in cur) if (k.startsWith('code:') && (top === '' || cur[k]! > cur[top]!)) top = k;
    const [region] = w.key;
    const severity = severityOf(rate, baseRate);
    return {
      severity,
      title: `Playback error spike in ${region}`,
      description: `Fatal errors in ${round(rate)} % of sessions against a baseline of ${round(baseRate)} %.`,
      data: { severity, region, current_rate: round(rate), baseline_rate: round(baseRate), affected_sessions: cur.fatal ?? 0, top_error_code: top.slice(5) || null },
    };
  },
};

export const qos: Pipeline = {
  name: 'qos',
  tables: [qosMinutes, qosStartupHistogram],
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms === 0) return;
    const rebuffer = seg.state === State.rebuffering ? sign * ms : 0;
    const minute = minuteOf(seg.to!);
    segmentKey[0] = attrs.tenant;
    segmentKey[1] = minute;
    segmentKey[2] = attrs.region;
    segmentKey[3] = attrs.pop;
    segmentValues[0] = sign * ms;
    segmentValues[1] = rebuffer;
    out.add(qosMinutes, segmentKey, segmentValues);
    segmentPop[0] = attrs.tenant;
    segmentPop[1] = attrs.region;
    segmentPop[2] = attrs.pop;
    segmentFields.watch_ms = sign * ms;
    segmentFields.rebuffer_ms = rebuffer;
    out.signal('qos_pop', segmentPop, minute, segmentFields);
  },
  sessionReads: ['tenant', 'region', 'pop', 'started_at', 'fatal_at', 'startup_ms', 'startup_at'],
  session(a, sign, out) {
    if (a.started_at !== null) {
      out.add(qosMinutes, key(a, a.started_at), [0, 0, sign, 0, 0, 0]);
      out.signal('qos_region', regionKey(a), minuteOf(a.started_at), { starts: sign });
    }
    if (a.fatal_at !== null) {
      out.add(qosMinutes, key(a, a.fatal_at), [0, 0, 0, sign, 0, 0]);
      out.signal('qos_region', regionKey(a), minuteOf(a.fatal_at), { fatal: sign });
    }
    if (a.startup_ms !== null && a.startup_at !== null) {
      const b = startupBucket(a.startup_ms);
      out.add(qosMinutes, key(a, a.startup_at), [0, 0, 0, 0, sign, sign * a.startup_ms]);
      out.add(qosStartupHistogram, [...key(a, a.startup_at), b], [sign]);
      out.signal('qos_region', regionKey(a), minuteOf(a.startup_at), { startups: sign, [`b${b}`]: sign });
    }
  },
  activity(a, e, marks, out) {
    const m = minuteOf(e.ts);
    if (marks.first('pop', m)) out.signal('qos_pop', popKey(a), m, { sessions: 1 });
    if (e.event_type === 'rebuffer_start' && marks.first('stall', m)) out.signal('qos_pop', popKey(a), m, { stalled: 1 });
    if (e.event_type === 'error' && e.properties?.fatal === true) {
      const code = e.properties.code;
      out.signal('qos_region', regionKey(a), m, { [`code:${typeof code === 'string' || typeof code === 'number' ? String(code).slice(0, 64) : 'unknown'}`]: 1 });
    }
  },
  detectors: [rebufferSpike, startupRegression, errorSpike],
};
