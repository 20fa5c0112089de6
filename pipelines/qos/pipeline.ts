import {
  columns,
  minuteOf,
  type Fields,
  type Pipeline,
  type SessionAttrs,
  type TableSpec,
} from '../../src/metric/pipeline.js';
import { State } from '../../src/aggregate/session.js';
import {
  cohortFields,
  cohortName,
  cohortSpike,
  describeCohort,
  explain,
  median,
  pct,
  negBinomialTail,
  normalTail,
  round,
  severityOf,
  sumFields,
  windowFields,
  windowSpans,
  type Cohort,
  type CohortDimensions,
  type Finding,
  type Window,
  windowDetector,
} from '../../src/metric/detector.js';
import { watchMs } from '../watch-time/pipeline.js';

const dims = [
  ['tenant', 'LowCardinality(String)'],
  ['ts', 'DateTime'],
  ['region', 'LowCardinality(String)'],
  ['pop', 'LowCardinality(String)'],
] as const;

/** Quality of experience per minute, region and pop: the inputs of rebuffer rate, startup time and error rate. */
export const qosMinutes = {
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
} as const satisfies TableSpec;

/** Startup times as a histogram with 5% wide buckets: percentiles to within 5%, summable across any grouping. */
export const qosStartupHistogram = {
  name: 'qos_startup_histogram',
  engine: 'sum',
  key: [...dims, ['bucket', 'UInt16']],
  values: [['startups', 'Int64']],
} as const satisfies TableSpec;

export const qosColumns = columns(qosMinutes);
export const histogramColumns = columns(qosStartupHistogram);

export const bucketGrowth = 1.05;

/** ln of a bucket's growth: one bucket's width in ln(ms). */
const bucketStep = Math.log(bucketGrowth);

/** Bucket b holds startup times in (1.05^(b-1), 1.05^b] ms; bucket 0 holds up to 1 ms. */
export function startupBucket(ms: number): number {
  return ms <= 1 ? 0 : Math.ceil(Math.log(ms) / bucketStep);
}

const key = (a: SessionAttrs, ms: number): [string, number, string, string] => [
  a.tenant,
  minuteOf(ms),
  a.region,
  a.pop,
];

// Detector signals (docs/alerts.md), per event-time minute:
// - `qos_pop` [tenant, region, pop]: watch_ms, rebuffer_ms; sessions (distinct, with any event in the minute);
//   stalled (distinct, with a rebuffer_start in it). `qos_pop_cohorts`, the same keys: both by cohort (`a@…`, `s@…`).
// - `qos_region` [tenant, region]: starts, active (distinct sessions with any event in the minute), fatal (sessions),
//   and fatal errors by code (`code:<code>`). `qos_region_cohorts`, the same keys: by cohort, active (`a@…`) and
//   fatal (`f@…`).
// And per 10 seconds, so that a startup window slides with the clock rather than start with a clock minute:
// - `qos_startups` [tenant, region]: startups and their histogram (`b<bucket>`); `qos_startups_cohorts`, the same
//   keys: by cohort, startups (`n@…`) and their ms (`m@…`).
const popKey = (a: SessionAttrs): string[] => [a.tenant, a.region, a.pop];

// What a segment hands the emitter, filled anew for each (the emitter copies what it keeps).
const segmentKey: [string, number, string, string] = ['', 0, '', ''];
const segmentValues = [0, 0, 0, 0, 0, 0];
const segmentPop = ['', '', ''];
const segmentFields = { watch_ms: 0, rebuffer_ms: 0 };
const regionKey = (a: SessionAttrs): string[] => [a.tenant, a.region];

// The cohorts a regional alert is explained by (docs/alerts.md "Naming the cause"): session attributes. A pop's
// alert is explained within the pop, by the others.
const regionCohorts: CohortDimensions = [
  ['pop', 'pop'],
  ['device', 'device'],
  ['app_version', 'app_version'],
  ['player', 'player'],
  ['content', 'content_id'],
];
const popCohorts = regionCohorts.slice(1);

/** Minutes of the metric an alert carries (`data.series`), ending with the one that raised it: for its chart. */
const seriesMinutes = 20;

/** The metric per minute around the alert, as `data.series`: null where a minute has nothing to measure. */
function seriesOf(
  w: Window,
  unit: '%' | 'ms',
  value: (f: Fields) => number | null,
): { start: string; step_seconds: number; unit: string; values: Array<number | null> } {
  const first = Math.floor(w.bucket / minute) * minute - (seriesMinutes - 1) * minute;
  const values: Array<number | null> = [];
  for (let m = first; m < first + seriesMinutes * minute; m += minute) {
    const f = sumFields(w, m, m + minute);
    const v = Object.keys(f).length > 0 ? value(f) : null;
    values.push(v === null ? null : round(v));
  }
  return { start: new Date(first * 1000).toISOString(), step_seconds: minute, unit, values };
}

/** The cohort that explains a finding, as its alert's `data.cohort`, and the words its title and description get. */
function cohortOf(
  c: Cohort | null,
  w: Window,
  what: string,
  mean = false,
): { data: Record<string, unknown> | null; words: string; sentence: string } {
  const sentence = describeCohort(c, w, what, mean ? ' ms' : ' %');
  if (!c) return { data: null, words: '', sentence };
  const words = `, mostly ${cohortName(c, w)}`;
  const data = mean
    ? {
        dimension: c.dimension,
        value: c.value,
        current_mean_ms: Math.round(c.current),
        baseline_mean_ms: Math.round(c.baseline),
        share: c.share,
        startups: c.exposure,
      }
    : { dimension: c.dimension, value: c.value, current_rate: c.current, baseline_rate: c.baseline, share: c.share };
  return { data, words, sentence };
}

/** A cohort that crossed its own condition (`cohortSpike`), in words. */
const cohortSpikeWords = (c: Cohort, w: Window, verb: string, what: string): string =>
  `Sessions of ${cohortName(c, w)} ${verb} in ${c.current} of every 100 session-minutes against ${c.baseline} before (${Math.round(c.share * 100)} % of the ${what})`;

/** The histogram's buckets (fields `b<bucket>`) that hold startups, in order, with their counts. */
function histogramBuckets(f: Fields): Array<readonly [number, number]> {
  return Object.keys(f)
    .filter((k) => k.startsWith('b') && f[k]! > 0)
    .map((k) => [Number(k.slice(1)), f[k]!] as const)
    .sort((a, b) => a[0] - b[0]);
}

/** The bucket holding percentile p of a startup histogram, or -1 when it has none. */
function percentileBucket(f: Fields, p: number): number {
  const buckets = histogramBuckets(f);
  const n = buckets.reduce((s, [, c]) => s + c, 0);
  let seen = 0;
  for (const [b, c] of buckets) {
    seen += c;
    if (seen >= p * n) return b;
  }
  return -1;
}

/** A bucket's upper bound in ms, as percentiles report it; 0 for none (-1). */
const bucketMs = (b: number): number => (b < 0 ? 0 : Math.round(bucketGrowth ** b));

/** Percentile of a startup histogram (fields `b<bucket>`), as the bucket's upper bound in ms. */
export function startupPercentile(f: Fields, p: number): number {
  return bucketMs(percentileBucket(f, p));
}

/**
 * Mean and variance of a histogram's log startup times, in buckets (5 % steps), each bucket clamped into [lo, hi]:
 * a startup 4 times the baseline median's, or a quarter of it, already says all it can about a median regression,
 * and the odd 30-second one should not decide it.
 */
function logMoments(f: Fields, lo: number, hi: number): { n: number; mean: number; variance: number } {
  let n = 0;
  let sum = 0;
  let squares = 0;
  for (const [b, c] of histogramBuckets(f)) {
    const x = Math.min(hi, Math.max(lo, b));
    n += c;
    sum += c * x;
    squares += c * x * x;
  }
  const mean = n > 0 ? sum / n : 0;
  return { n, mean, variance: n > 1 ? Math.max(0, (squares - n * mean * mean) / (n - 1)) : 0 };
}

/** Buckets within a factor of 4 of a startup time: ln 4 / ln 1.05. */
const clampBuckets = Math.ceil(Math.log(4) / bucketStep);

const minute = 60;
/** The startup signals' bucket, in seconds. */
const startupStep = 10;
const startupBucketOf = (ms: number): number => Math.floor(ms / (startupStep * 1000)) * startupStep;

/** Startups of a histogram (fields `b<bucket>`) in buckets whose upper bound is `ms` or more (as percentiles read them). */
function startupsFrom(f: Fields, ms: number): number {
  let n = 0;
  for (const k in f) if (k.startsWith('b') && bucketGrowth ** Number(k.slice(1)) >= ms) n += f[k]!;
  return n;
}

/** `guard_minutes` of the detectors whose baselines have one (errors, startup). */
const guardMinutes =
  'the baseline ends this many minutes before the window, so that an incident\u2019s first minutes, found by no window yet, stay out of the baselines of the windows after them';

/** The baseline of the window of `span` minutes ending with `w.bucket`'s end: [its start, `guard` minutes before the window's start). */
const baselineRange = (w: Window<'baseline_minutes'>, span: number, guard = 0): [number, number] => {
  const end = w.bucket + w.step - (span + guard) * minute;
  return [end - w.thresholds.baseline_minutes * minute, end];
};

/**
 * The counts of the window of `span` minutes ending with `w.bucket` and of its baseline, firing minutes left out: of
 * the detector's signal, or of its cohort signal (to explain a finding).
 */
function windowAndBaseline(
  w: Window<'baseline_minutes' | 'guard_minutes'>,
  span: number,
  read: 'at' | 'cohorts' = 'at',
): { cur: Fields; base: Fields } {
  const [from, to] = baselineRange(w, span, w.thresholds.guard_minutes);
  return { cur: windowFields(w, span, read), base: sumFields(w, from, to, true, read) };
}

export const rebufferSpike = windowDetector({
  kind: 'window',
  category: 'qos.rebuffer_spike',
  source: 'qos',
  signal: 'qos_pop',
  cohortSignal: 'qos_pop_cohorts',
  bucketSeconds: minute,
  historyBuckets: 64,
  running: 2,
  params: {
    ratio: 'the rebuffer rate of the minute is at least this many times the baseline',
    min_points: 'and at least this many percentage points above it',
    min_sessions: 'sessions with an event in the minute, at least',
    baseline_minutes: 'the baseline is the median of the per-minute rates of this many minutes before',
    min_baseline_minutes: 'minutes with watch time the baseline needs, at least',
    cohort_min_stalled:
      'a cohort alone (a device type, an app version, a player, a title): stalled sessions in the two minutes, at least',
    cohort_max_chance:
      'and so many would stall by chance at its own baseline rate less often than this (a negative binomial tail)',
  },
  evaluate(w) {
    const t = w.thresholds;
    const cur = w.at(w.bucket);
    if (!cur || !cur.watch_ms) return null;
    // The pop's condition needs its sessions, a cohort's its stalled sessions: most minutes of most pops have neither.
    const stalled = (cur.stalled ?? 0) + (w.at(w.bucket - minute)?.stalled ?? 0);
    if ((cur.sessions ?? 0) < t.min_sessions && stalled < t.cohort_min_stalled) return null;
    const rate = pct(cur.rebuffer_ms ?? 0, cur.watch_ms);
    const [from, to] = baselineRange(w, 1);
    const rates: number[] = [];
    // And the baseline's stalled sessions per session, for the cohorts' gate below, in the same pass.
    let baseStalled = 0;
    let baseSessions = 0;
    for (let b = from; b < to; b += minute) {
      const f = w.at(b);
      if (!f || w.firing(b)) continue;
      baseStalled += f.stalled ?? 0;
      baseSessions += f.sessions ?? 0;
      if (f.watch_ms && f.watch_ms > 0) rates.push(pct(f.rebuffer_ms ?? 0, f.watch_ms));
    }
    if (rates.length < t.min_baseline_minutes) return null;
    const base = median(rates);
    const popHolds = (cur.sessions ?? 0) >= t.min_sessions && rate >= t.ratio * base && rate >= base + t.min_points;
    if (!popHolds) {
      // A cohort cannot cross on its own with fewer stalled sessions in the pop, nor (short of the others falling as
      // it rises) while the pop stalls no more than its baseline expects: its sums are not read then.
      const sessions = (cur.sessions ?? 0) + (w.at(w.bucket - minute)?.sessions ?? 0);
      if (stalled < t.cohort_min_stalled || stalled <= (sessions * baseStalled) / Math.max(1, baseSessions))
        return null;
    }
    // Stalled sessions per session-minute, by cohort: the two running minutes against the baseline's.
    const cur2 = sumFields(w, w.bucket - minute, w.bucket + minute, false, 'cohorts');
    const baseOf = (keep?: (field: string) => boolean): Fields => sumFields(w, from, to, true, 'cohorts', keep);
    // A cohort alone: in this minute, or, while it has too few sessions yet, with the minute before. (The two
    // minutes alone dilute a spike's first minute with the one before it, which delays the alert by a minute.)
    const condition = {
      ratio: t.ratio,
      minPoints: t.min_points,
      minExposure: t.min_sessions,
      minBad: t.cohort_min_stalled,
      maxChance: t.cohort_max_chance,
    };
    const spike = popHolds
      ? null
      : (cohortSpike(w.cohorts(w.bucket) ?? {}, baseOf, 's', 'a', condition) ??
        cohortSpike(cur2, baseOf, 's', 'a', condition));
    if (!popHolds && !spike) return null;
    const [region, pop] = w.key;
    const cohort = cohortOf(spike ?? explain(cur2, baseOf(), 's', 'a', 'rate'), w, 'of the stalled sessions');
    const severity = spike ? severityOf(spike.current, spike.baseline) : severityOf(rate, base);
    return {
      severity,
      // The pop's rate has no chance test of its own, so it must hold two minutes running; a cohort's has.
      now: spike !== null,
      title: spike
        ? `Rebuffering spike in ${region} / ${pop} for ${cohortName(spike, w)}`
        : `Rebuffering spike in ${region} / ${pop}${cohort.words}`,
      description: spike
        ? `${cohortSpikeWords(spike, w, 'stalled', 'stalled sessions')}, while the pop's rebuffer rate is ${round(rate)} % against a baseline of ${round(base)} % over ${cur.sessions} sessions.`
        : `Rebuffer rate ${round(rate)} % against a baseline of ${round(base)} % over ${cur.sessions} sessions.${cohort.sentence}`,
      // Stalled sessions of the minute, or of the minute before when more (this one may have just begun).
      data: {
        severity,
        region,
        pop,
        current_rate: round(rate),
        baseline_rate: round(base),
        affected_sessions: Math.max(cur.stalled ?? 0, w.at(w.bucket - minute)?.stalled ?? 0),
        cohort: cohort.data,
        series: seriesOf(w, '%', (f) => (f.watch_ms ? pct(f.rebuffer_ms ?? 0, f.watch_ms) : null)),
      },
    };
  },
});

export const startupRegression = windowDetector({
  kind: 'window',
  category: 'qos.startup_regression',
  source: 'qos',
  signal: 'qos_startups',
  cohortSignal: 'qos_startups_cohorts',
  bucketSeconds: startupStep,
  historyBuckets: (64 * minute) / startupStep,
  running: 1,
  params: {
    min_window_minutes: 'startups of this many minutes are compared first (windows end with the current 10 seconds)',
    window_minutes: 'then, when that window does not hold, of this many',
    max_window_minutes: 'and then of this many',
    ratio: 'their p50 is at least this many times the baseline p50',
    min_increase_ms: 'and at least this many milliseconds more',
    min_starts: 'startups in the window (and in the baseline), at least',
    baseline_minutes: 'the baseline is the startups of this many minutes before the window',
    guard_minutes: guardMinutes,
    max_chance:
      'and the window\u2019s mean log startup time would stand so far above the baseline\u2019s by chance less often than this (a normal tail, with both samples and the drift counted)',
    drift:
      'how far a region\u2019s startup time moves between a window and its baseline beyond chance: the standard deviation of its natural logarithm (a region\u2019s level drifts, so its minutes are not independent draws)',
  },
  evaluate(w) {
    const t = w.thresholds;
    for (const span of windowSpans(t)) {
      const { cur, base } = windowAndBaseline(w, span);
      const n = cur.startups ?? 0;
      if (n < t.min_starts || (base.startups ?? 0) < t.min_starts) continue;
      const p50 = startupPercentile(cur, 0.5);
      const mid = percentileBucket(base, 0.5);
      const baseP50 = bucketMs(mid);
      if (p50 < t.ratio * baseP50 || p50 < baseP50 + t.min_increase_ms) continue;
      // Is the window's median really that far up, or did a few dozen startups land there by chance? Their mean log
      // startup time uses every startup, where a count over the line uses only its side of it: against the
      // baseline's, with the baseline's spread for both samples, and the region's drift beyond chance.
      const now = logMoments(cur, mid - clampBuckets, mid + clampBuckets);
      const before = logMoments(base, mid - clampBuckets, mid + clampBuckets);
      const rise = (now.mean - before.mean) * bucketStep;
      const error = Math.sqrt(before.variance * bucketStep ** 2 * (1 / now.n + 1 / before.n) + t.drift ** 2);
      if (normalTail(rise / error) >= t.max_chance) continue;
      const line = Math.max(t.ratio * baseP50, baseP50 + t.min_increase_ms);
      const slow = startupsFrom(cur, line);
      const [region] = w.key;
      const severity = severityOf(p50, baseP50);
      const cohorts = windowAndBaseline(w, span, 'cohorts');
      const cohort = cohortOf(
        explain(cohorts.cur, cohorts.base, 'm', 'n', 'mean'),
        w,
        'of the added startup time',
        true,
      );
      return {
        severity,
        title: `Startup time regression in ${region}${cohort.words}`,
        description: `Median startup ${p50} ms against a baseline of ${baseP50} ms over the ${n} startups of the last ${span} minutes.${cohort.sentence}`,
        data: {
          severity,
          region,
          current_p50_ms: p50,
          baseline_p50_ms: baseP50,
          current_p95_ms: startupPercentile(cur, 0.95),
          affected_sessions: slow,
          cohort: cohort.data,
          series: seriesOf(w, 'ms', (f) => (f.startups ? startupPercentile(f, 0.5) : null)),
        },
      };
    }
    return null;
  },
});

const errorParams = {
  min_window_minutes:
    'sessions playing in this many minutes are compared first (the current minute and those before it)',
  window_minutes: 'then, when that window does not hold, of this many',
  ratio: 'their fatal error rate is at least this many times the baseline',
  min_points: 'and at least this many percentage points above it',
  min_sessions: 'sessions playing in the window (and session-minutes in the baseline), at least',
  min_errors: 'sessions with a fatal error in the window, at least (ours: one error in 25 sessions is not a spike)',
  baseline_minutes: 'the baseline is the sessions of this many minutes before the window',
  guard_minutes: guardMinutes,
  max_chance:
    "and so many fatal sessions would come by chance at the baseline's rate less often than this (a negative binomial tail)",
  cohort_max_chance:
    'a cohort alone (a pop, a device type, an app version, a player, a title) whose fatal sessions per session-minute cross ratio, min_points, min_sessions and min_errors against its own baseline, and would come by chance less often than this',
};
type ErrorParams = keyof typeof errorParams;

/** The error spike's condition over the window of `span` minutes ending with `w.bucket`, region or cohort alone. */
function errorsOver(w: Window<ErrorParams>, span: number): Finding | null {
  const t = w.thresholds;
  const cur = windowFields(w, span);
  const fatal = cur.fatal ?? 0;
  // Neither the region nor a cohort can cross with fewer: most windows are done here, their baselines unread.
  if (fatal < t.min_errors) return null;
  const [from, to] = baselineRange(w, span, t.guard_minutes);
  const base = sumFields(w, from, to, true);
  // Sessions fail at their start (a licence, a manifest) and while they play (decoding, the network): the errors
  // expected are the larger of the baseline's rate per start and per session-minute (sessions with an event, summed
  // per minute), so that neither a wave of arrivals nor a quiet spell of them looks like a spike. Counted against
  // starts alone, a dip in starts made most false alerts of the first steady day (bench/RESULTS.md).
  const starts = cur.starts ?? 0;
  const exposure = cur.active ?? 0;
  const baseStarts = base.starts ?? 0;
  const baseExposure = base.active ?? 0;
  // Sessions playing in the window: those seen in its first minute, and those that started after it.
  const first = w.bucket - (span - 1) * minute;
  const sessions = Math.max(
    fatal,
    (w.at(first)?.active ?? 0) + (sumFields(w, first + minute, w.bucket + minute).starts ?? 0),
  );
  const baseFatal = base.fatal ?? 0;
  // The window's exposure against the baseline's, as starts or as session-minutes: the larger.
  const scale = Math.max(starts / Math.max(1, baseStarts), exposure / baseExposure);
  const rate = pct(fatal, sessions);
  const baseRate = pct(scale * baseFatal, sessions);
  // A handful of errors among a few dozen sessions is ordinary noise, and a baseline of a few errors says little
  // about the rate: how often would so many come by chance, the baseline's own uncertainty counted?
  const regionHolds =
    sessions >= t.min_sessions &&
    baseExposure >= t.min_sessions &&
    rate >= t.ratio * baseRate &&
    rate >= baseRate + t.min_points &&
    negBinomialTail(fatal, baseFatal + 1, 1 / (1 + scale)) < t.max_chance;
  // As for rebuffering: no cohort can cross alone while the region has no more than its baseline expects.
  if (!regionHolds && fatal <= scale * baseFatal) return null;
  // Fatal sessions per session-minute, by cohort.
  const cohortsCur = windowFields(w, span, 'cohorts');
  const baseOf = (keep?: (field: string) => boolean): Fields => sumFields(w, from, to, true, 'cohorts', keep);
  const spike = regionHolds
    ? null
    : cohortSpike(cohortsCur, baseOf, 'f', 'a', {
        ratio: t.ratio,
        minPoints: t.min_points,
        minExposure: t.min_sessions,
        minBad: t.min_errors,
        maxChance: t.cohort_max_chance,
      });
  if (!regionHolds && !spike) return null;
  let top = '';
  for (const k in cur) if (k.startsWith('code:') && (top === '' || cur[k]! > cur[top]!)) top = k;
  const [region] = w.key;
  const severity = spike ? severityOf(spike.current, spike.baseline) : severityOf(rate, baseRate);
  const cohort = cohortOf(spike ?? explain(cohortsCur, baseOf(), 'f', 'a', 'rate'), w, 'of the failed sessions');
  return {
    severity,
    title: spike
      ? `Playback error spike in ${region} for ${cohortName(spike, w)}`
      : `Playback error spike in ${region}${cohort.words}`,
    description: spike
      ? `${cohortSpikeWords(spike, w, 'failed', 'failed sessions')}, while fatal errors in the region are ${round(rate)} % of the ${sessions} sessions playing in the last ${span} minutes against a baseline of ${round(baseRate)} %.`
      : `Fatal errors in ${round(rate)} % of the ${sessions} sessions playing in the last ${span} minutes against a baseline of ${round(baseRate)} %.${cohort.sentence}`,
    data: {
      severity,
      region,
      current_rate: round(rate),
      baseline_rate: round(baseRate),
      affected_sessions: fatal,
      top_error_code: top.slice(5) || null,
      cohort: cohort.data,
      series: seriesOf(w, '%', (f) => (f.active ? pct(f.fatal ?? 0, f.active) : null)),
    },
  };
}

export const errorSpike = windowDetector({
  kind: 'window',
  category: 'qos.error_spike',
  source: 'qos',
  signal: 'qos_region',
  cohortSignal: 'qos_region_cohorts',
  bucketSeconds: minute,
  historyBuckets: 64,
  running: 1,
  params: errorParams,
  evaluate(w) {
    // The shortest window first: a large incident fills it and is alerted sooner; the longer one waits for a small one.
    for (const span of windowSpans(w.thresholds)) {
      const found = errorsOver(w, span);
      if (found) return found;
    }
    return null;
  },
});

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
  sessionReads: [
    'tenant',
    'region',
    'pop',
    'device',
    'app_version',
    'player',
    'content_id',
    'started_at',
    'fatal_at',
    'startup_ms',
    'startup_at',
  ],
  session(a, sign, out) {
    if (a.started_at !== null) {
      out.add(qosMinutes, key(a, a.started_at), [0, 0, sign, 0, 0, 0]);
      out.signal('qos_region', regionKey(a), minuteOf(a.started_at), { starts: sign });
    }
    if (a.fatal_at !== null) {
      out.add(qosMinutes, key(a, a.fatal_at), [0, 0, 0, sign, 0, 0]);
      const region = regionKey(a);
      out.signal('qos_region', region, minuteOf(a.fatal_at), { fatal: sign });
      out.signal('qos_region_cohorts', region, minuteOf(a.fatal_at), cohortFields(a, regionCohorts, { f: sign }));
    }
    if (a.startup_ms !== null && a.startup_at !== null) {
      const b = startupBucket(a.startup_ms);
      out.add(qosMinutes, key(a, a.startup_at), [0, 0, 0, 0, sign, sign * a.startup_ms]);
      out.add(qosStartupHistogram, [...key(a, a.startup_at), b], [sign]);
      const region = regionKey(a);
      const at = startupBucketOf(a.startup_at);
      out.signal('qos_startups', region, at, { startups: sign, [`b${b}`]: sign });
      out.signal(
        'qos_startups_cohorts',
        region,
        at,
        cohortFields(a, regionCohorts, { n: sign, m: sign * a.startup_ms }),
      );
    }
  },
  activity(a, e, marks, out) {
    const m = minuteOf(e.ts);
    if (marks.first('pop', m)) {
      const pop = popKey(a);
      const region = regionKey(a);
      out.signal('qos_pop', pop, m, { sessions: 1 });
      out.signal('qos_pop_cohorts', pop, m, cohortFields(a, popCohorts, { a: 1 }));
      out.signal('qos_region', region, m, { active: 1 });
      out.signal('qos_region_cohorts', region, m, cohortFields(a, regionCohorts, { a: 1 }));
    }
    if (e.event_type === 'rebuffer_start' && marks.first('stall', m)) {
      const pop = popKey(a);
      out.signal('qos_pop', pop, m, { stalled: 1 });
      out.signal('qos_pop_cohorts', pop, m, cohortFields(a, popCohorts, { s: 1 }));
    }
    if (e.event_type === 'error' && e.properties?.fatal === true) {
      const code = e.properties.code;
      out.signal('qos_region', regionKey(a), m, {
        [`code:${typeof code === 'string' || typeof code === 'number' ? String(code).slice(0, 64) : 'unknown'}`]: 1,
      });
    }
  },
  detectors: [rebufferSpike, startupRegression, errorSpike],
};
