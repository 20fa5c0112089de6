import type { Fields, SessionAttrs } from './pipeline.js';

// What a detector (declared in a pipelines/*.ts file next to the signals it reads) is, and what the alerts role's
// engine (engine.ts) gives it. docs/alerts.md has every condition in words.

export type Severity = 'critical' | 'warning' | 'info';
export type AlertSource = 'qos' | 'billing' | 'content' | 'ingest';

/** What a detector found: the alert's severity and the §7 `data` of its category (severity included). */
export interface Finding {
  severity: Severity;
  title: string;
  description: string;
  data: Record<string, unknown>;
  /**
   * Raise it now, without waiting for the detector's `running` buckets: a condition that is itself a chance test
   * (a cohort alone, held to its own `max_chance`) needs no second bucket to tell it from noise.
   */
  now?: boolean;
}

/**
 * A detector's view of one key's signal history, at the bucket being evaluated. `P`: the detector's threshold names,
 * so a name it does not declare is a compile error, not a silent NaN.
 */
export interface Window<P extends string = string> {
  /** The key's parts after the tenant (a region and pop, a region, a content id, nothing). */
  key: readonly string[];
  /** Start (Unix seconds) of the bucket evaluated: the last one of the window. */
  bucket: number;
  /** Bucket length in seconds. */
  step: number;
  /** Start of the earliest bucket still held for this key (how far back its history reaches). */
  since: number;
  /** The fields of the bucket starting at `start`, or undefined when it has none. */
  at(start: number): Fields | undefined;
  /** The fields of the detector's `cohortSignal` (same key) in the bucket starting at `start`, or undefined. */
  cohorts(start: number): Fields | undefined;
  /** Whether the bucket starting at `start` was found firing when it was evaluated (baselines leave those out). */
  firing(start: number): boolean;
  /** The name a once detector's `label` gave an id of this tenant (a content's title), or ''. */
  label(id: string): string;
  /** The tenant's thresholds for this category: config/alerts.json with its overrides. */
  thresholds: Readonly<Record<P, number>>;
}

/**
 * A condition over windows of a signal's buckets (rebuffer spike, error spike, payment failure, ...). The engine
 * sums the shards' signals per key and bucket, evaluates each bucket that changes, and raises an alert once per
 * incident when `running` consecutive buckets fire; it resolves it once none has fired for 5 minutes.
 */
export interface WindowDetector<P extends string = string> {
  kind: 'window';
  category: string;
  source: AlertSource;
  signal: string;
  /**
   * A signal of the same keys whose counters are split by cohort (docs/alerts.md "Naming the cause"): kept beside
   * `signal`'s buckets and read only when a finding is explained (`Window.cohorts`), never evaluated.
   */
  cohortSignal?: string;
  /** Buckets of the cohort signal kept per key (its baseline when a finding is explained); `historyBuckets` if not set. */
  cohortHistoryBuckets?: number;
  /** Bucket length in seconds: 60, 3600 for hourly conditions, 10 for a window that slides with the clock. */
  bucketSeconds: number;
  /** Buckets of history kept per key: the window and the baseline behind it. */
  historyBuckets: number;
  /** Consecutive firing buckets before an alert is raised (unless a finding says `now`). */
  running: number;
  /** Threshold names and what each means (defaults in config/alerts.json). */
  params: Readonly<Record<P, string>>;
  /** A finding when the window ending with `w.bucket` meets the condition, else null. */
  evaluate(w: Window<P>): Finding | null;
}

/** A window detector whose thresholds are typed by the names its `params` declare. */
export function windowDetector<P extends string>(d: WindowDetector<P>): WindowDetector<P> {
  return d;
}

/** A first sighting (a new release): raised once per mark, ever, for the whole cluster. */
export interface OnceDetector {
  kind: 'once';
  category: string;
  source: AlertSource;
  signal: string;
  params: Readonly<Record<string, string>>;
  /** What makes two sightings the same (the key's parts after the tenant). */
  mark(key: readonly string[]): string;
  finding(key: readonly string[], fields: Fields): Finding;
  /** A human name the key gives an id ([id, name]), kept for window detectors' findings (`Window.label`). */
  label?(key: readonly string[]): readonly [string, string] | null;
}

export type Detector = WindowDetector | OnceDetector;

/**
 * Σ of each field over buckets [from, to) (step apart), leaving out firing buckets when asked; of `w.cohorts` when
 * asked; of the fields `keep` keeps, when given.
 */
export function sumFields(
  w: Window,
  from: number,
  to: number,
  skipFiring = false,
  read: 'at' | 'cohorts' = 'at',
  keep?: (field: string) => boolean,
): Fields {
  const out: Fields = {};
  for (let b = from; b < to; b += w.step) {
    if (skipFiring && w.firing(b)) continue;
    const f = w[read](b);
    if (f) for (const k in f) if (!keep || keep(k)) out[k] = (out[k] ?? 0) + f[k]!;
  }
  return out;
}

/** Σ of each field over the `minutes` of buckets ending with `w.bucket`'s end (of `w.cohorts` when asked). */
export function windowFields(w: Window, minutes: number, read: 'at' | 'cohorts' = 'at'): Fields {
  const end = w.bucket + w.step;
  return sumFields(w, end - minutes * 60, end, false, read);
}

/**
 * The windows a condition is judged over, shortest first: `min_window_minutes` when it has one, `window_minutes`, then
 * `max_window_minutes` when longer. A large audience fills the short window's sample and is alerted sooner; a small one
 * waits for the long window's.
 */
export function windowSpans(t: Readonly<Record<string, number>>): number[] {
  const spans = [t.min_window_minutes, t.window_minutes!, t.max_window_minutes].filter((s) => s !== undefined);
  return [...new Set(spans)].sort((a, b) => a - b);
}

export const pct = (part: number, whole: number): number => (whole > 0 ? (part / whole) * 100 : 0);

export const round = (n: number, digits = 2): number => Math.round(n * 10 ** digits) / 10 ** digits;

export function median(values: number[]): number {
  const s = values.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** §7: critical when the current value is at least 3 times its baseline (any value over a zero baseline). */
export function severityOf(current: number, baseline: number): Severity {
  return baseline > 0 ? (current / baseline >= 3 ? 'critical' : 'warning') : current > 0 ? 'critical' : 'warning';
}

function logChoose(n: number, k: number): number {
  let s = 0;
  for (let i = 1; i <= k; i++) s += Math.log((n - k + i) / i);
  return s;
}

const erfcFit = [
  -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223,
  0.17087277,
];

/**
 * P(Z ≥ z) for a standard normal Z: erfc(z / √2) / 2, by the Chebyshev fit of Numerical Recipes' erfcc, whose
 * relative error is under 1.2e-7: still right at the 10⁻⁶ to 10⁻¹⁰ the detectors read.
 */
export function normalTail(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.5 * x);
  let poly = 0;
  for (let i = erfcFit.length - 1; i >= 0; i--) poly = erfcFit[i]! + t * poly;
  const erfc = t * Math.exp(-x * x + poly);
  return z >= 0 ? erfc / 2 : 1 - erfc / 2;
}

/**
 * P(X ≥ k) for X ~ NegativeBinomial(r, p): the count a window would show by chance when its baseline counted r − 1
 * in an exposure that is p / (1 − p) times the window's. This is the Poisson count of the window with the baseline's
 * rate as uncertain as a count of r − 1 leaves it (a Gamma–Poisson mixture, the rate's prior adding one count), so a
 * quiet baseline of a few errors does not make an ordinary cluster look impossible. Summed from k upward in log space.
 */
export function negBinomialTail(k: number, r: number, p: number): number {
  if (k <= 0) return 1;
  if (p >= 1) return 0;
  let logTerm = logChoose(k + r - 1, k) + r * Math.log(p) + k * Math.log1p(-p);
  let sum = 0;
  for (let i = k; i < k + 100_000; i++) {
    const term = Math.exp(logTerm);
    sum += term;
    if (term < sum * 1e-12 && (i + r) * (1 - p) < i + 1) break;
    logTerm += Math.log(((i + r) / (i + 1)) * (1 - p));
  }
  return Math.min(1, sum);
}

/**
 * Cohort counters are the fields of a detector's `cohortSignal`, named `<metric>@<dimension>=<value>` (a metric is one
 * letter): the bucket's counts split by one session attribute, e.g. `f@device=tv`, fatal sessions of TVs. Names are interned per metric,
 * dimension and value, as a pipeline makes them for every session-minute.
 */
const cohortNames = new Map<string, Map<string, Map<string, string>>>();
const maxCohortNames = 50_000;
export const maxCohortValue = 64;

export function cohortField(metric: string, dimension: string, value: string): string {
  // Three lookups and no string built: a shard asks this for every session-minute.
  let byDimension = cohortNames.get(metric);
  if (!byDimension) cohortNames.set(metric, (byDimension = new Map<string, Map<string, string>>()));
  let m = byDimension.get(dimension);
  if (!m) byDimension.set(dimension, (m = new Map<string, string>()));
  let name = m.get(value);
  if (name === undefined) {
    // Values come from clients: made-up ones must not grow this without bound.
    if (m.size >= maxCohortNames) m.clear();
    name = `${metric}@${dimension}=${value.slice(0, maxCohortValue)}`;
    m.set(value, name);
  }
  return name;
}

/** A session attribute that holds a cohort's value (a string: a pop, a device type, an app version, ...). */
type CohortAttr = { [K in keyof SessionAttrs]: SessionAttrs[K] extends string ? K : never }[keyof SessionAttrs];

/** The dimensions a detector's alerts are explained by, each with the session attribute that holds its value. */
export type CohortDimensions = ReadonlyArray<readonly [string, CohortAttr]>;

/** The session's counts (metric letter → count) as cohort counters: each metric once per cohort of the session. */
export function cohortFields(a: SessionAttrs, cohorts: CohortDimensions, counts: Fields): Fields {
  const fields: Fields = {};
  for (const metric in counts)
    for (const [dimension, attr] of cohorts) fields[cohortField(metric, dimension, a[attr])] = counts[metric]!;
  return fields;
}

/** A cohort in words: its dimension as people say it, and the content's title where the alerts role knows it. */
export const cohortName = (c: Cohort, w: Window): string =>
  `${c.dimension === 'app_version' ? 'app version' : c.dimension} ${c.dimension === 'content' ? w.label(c.value) || c.value : c.value}`;

/** The sentence an alert's description gets for its cohort (`what` it holds a share of), or for none. */
export function describeCohort(c: Cohort | null, w: Window, what: string, unit: string): string {
  if (!c) return ' No single cohort stands out.';
  return ` ${cohortName(c, w)} holds ${Math.round(c.share * 100)} % ${what}: ${c.current}${unit} against ${c.baseline}${unit} before.`;
}

/** A cohort that explains a finding: one value of one dimension, and how it moved. */
export interface Cohort {
  dimension: string;
  value: string;
  /** The cohort's measure in the window and in its own baseline: a rate in %, or a mean. */
  current: number;
  baseline: number;
  /** For a rate: its part of the window's affected sessions; for a mean: its part of what the window has above its baseline. */
  share: number;
  /** Its count of the exposure in the window (sessions or startups). */
  exposure: number;
}

/** Per dimension, per value: the `bad` and `exposure` counts of the window, then of the baseline. */
function cohortCounts(
  cur: Fields,
  base: Fields,
  bad: string,
  exposure: string,
): Map<string, Map<string, [number, number, number, number]>> {
  const dims = new Map<string, Map<string, [number, number, number, number]>>();
  const take = (f: Fields, offset: number): void => {
    for (const k in f) {
      if (k.charCodeAt(1) !== 64 /* @ */) continue;
      const which = k[0] === bad ? 0 : k[0] === exposure ? 1 : -1;
      if (which < 0) continue;
      const eq = k.indexOf('=');
      const dim = k.slice(2, eq);
      const value = k.slice(eq + 1);
      let values = dims.get(dim);
      if (!values) dims.set(dim, (values = new Map<string, [number, number, number, number]>()));
      let c = values.get(value);
      if (!c) values.set(value, (c = [0, 0, 0, 0]));
      c[(offset + which) as 0 | 1 | 2 | 3] += f[k]!;
    }
  };
  take(cur, 0);
  take(base, 2);
  return dims;
}

/** A named cohort explains at least this part of what the window has above its baseline... */
export const cohortMinShare = 0.5;
/** ...and its count against its baseline's expectation is at least this many times the rest's (else all moved alike)... */
export const cohortMinConcentration = 1.5;
/** ...and, of a count, a part that large would come by chance less often than this, had every cohort moved alike. */
export const cohortMaxChance = 0.01;

/** P(X ≥ k) for X ~ Binomial(n, p), summed from k upward in log space. */
export function binomialTail(k: number, n: number, p: number): number {
  if (k <= 0) return 1;
  if (k > n || p <= 0) return 0;
  if (p >= 1) return 1;
  let logTerm = logChoose(n, k) + k * Math.log(p) + (n - k) * Math.log1p(-p);
  let sum = 0;
  for (let i = k; i <= n; i++) {
    const term = Math.exp(logTerm);
    sum += term;
    if (term < sum * 1e-12) break;
    logTerm += Math.log(((n - i) / (i + 1)) * (p / (1 - p)));
  }
  return Math.min(1, sum);
}

/**
 * Contribution analysis (as Adtributor, or Conviva's cohort alerts): which single cohort, among every dimension's
 * values, holds what the window has above its baseline. For each value, excess = bad − exposure × its own baseline
 * rate (shrunk toward its dimension's rate by `prior` units of exposure, so a cohort new to the baseline is judged by
 * its dimension). A cohort is named when it holds at least `cohortMinShare` of its dimension's excess and its count
 * against its expectation is at least `cohortMinConcentration` times that of the dimension's other values together
 * (for a count, its part of the window's must also be one that chance gives less often than `cohortMaxChance`); of
 * those, the most concentrated against the whole dimension, the narrowest explanation. None, when the whole scope
 * moved alike: a region-wide incident, in which every cohort's count grew by the same factor whatever its own level.
 * `bad` and `exposure` are metric letters; `kind` says whether bad / exposure is a rate (shown in %) or a mean.
 */
export function explain(
  cur: Fields,
  base: Fields,
  bad: string,
  exposure: string,
  kind: 'rate' | 'mean',
): Cohort | null {
  const dims = cohortCounts(cur, base, bad, exposure);
  let best: Cohort | null = null;
  let bestConcentration = 0;
  for (const [dimension, values] of dims) {
    const x = expectations(values, kind);
    if (!x) continue;
    for (const [value, [cb, ce]] of values) {
      const e = x.expected.get(value)!;
      if (value === '' || cb <= e || ce <= 0) continue;
      const s = standing(x, cb, e, 'rest');
      if (!s || s.concentration <= bestConcentration) continue;
      // Were the whole scope moved alike, each of the window's bad sessions would be this cohort's with the chance its
      // expected part gives: a handful (a partial minute) often puts most of them in one title by chance.
      if (kind === 'rate' && binomialTail(cb, x.bad, e / x.allExpected) >= cohortMaxChance) continue;
      const scale = kind === 'rate' ? 100 : 1;
      bestConcentration = s.concentration;
      best = {
        dimension,
        value,
        current: round((cb / ce) * scale),
        baseline: round((e / ce) * scale),
        share: round(kind === 'rate' ? cb / x.bad : s.share),
        exposure: ce,
      };
    }
  }
  return best;
}

/** A dimension's window against its values' baselines (`expectations`). */
interface Expectations {
  bad: number;
  expected: Map<string, number>;
  allExpected: number;
  excess: number;
}

/**
 * What each value of a dimension has in the window beyond what its own baseline expects of its exposure there: the
 * window's bad, each value's expected count, their sum, and the sum of the values' excess; null when the dimension has
 * nothing to compare. A value's part of the window's bad against its part of the expected (its concentration) is
 * about 1 for every value when the whole scope moved alike (each by the same factor), however their own levels differ.
 */
function expectations(
  values: Map<string, [number, number, number, number]>,
  kind: 'rate' | 'mean',
): Expectations | null {
  let bad = 0;
  let curExposure = 0;
  let baseBad = 0;
  let baseExposure = 0;
  for (const [cb, ce, bb, be] of values.values()) {
    bad += cb;
    curExposure += ce;
    baseBad += bb;
    baseExposure += be;
  }
  if (baseExposure <= 0 || curExposure <= 0) return null;
  // A count's rate is smoothed by one event, so a baseline without any still expects each value its exposure's part.
  const dimRate = kind === 'rate' ? (baseBad + 1) / (baseExposure + 1) : baseBad / baseExposure;
  const prior = kind === 'rate' ? 3 / dimRate : 3;
  const expected = new Map<string, number>();
  let allExpected = 0;
  let excess = 0;
  for (const [value, [cb, ce, bb, be]] of values) {
    const e = ce * ((bb + prior * dimRate) / (be + prior));
    expected.set(value, e);
    allExpected += e;
    if (cb > e) excess += cb - e;
  }
  return excess <= 0 || bad <= 0 || allExpected <= 0 ? null : { bad, expected, allExpected, excess };
}

/**
 * A value with `cb` bad of the window, `e` expected of it, as it stands in its dimension (`expectations`): its part of
 * the dimension's excess and its concentration, when both reach what a named cohort needs; else null. Concentration
 * is its count against its expectation over the same of the whole dimension (`scope`, at most 1 / its expected part),
 * or of the dimension's other values (`rest`): a cohort that holds most of a title's sessions can be the one that
 * moved while the others did not, which only the second can say.
 */
function standing(
  x: Expectations,
  cb: number,
  e: number,
  against: 'scope' | 'rest',
): { share: number; concentration: number } | null {
  const share = (cb - e) / x.excess;
  const concentration = cb / x.bad / (e / x.allExpected);
  const restExpected = x.allExpected - e;
  const stands =
    against === 'scope'
      ? concentration >= cohortMinConcentration
      : restExpected > 0 && cb / e >= cohortMinConcentration * ((x.bad - cb) / restExpected);
  return share >= cohortMinShare && stands ? { share, concentration } : null;
}

/** What a cohort's own rate must do for `cohortSpike` to find it. */
export interface CohortCondition {
  /** Its rate (bad per 100 of exposure) at least this many times its baseline's... */
  ratio: number;
  /** ...and at least this many points above it... */
  minPoints: number;
  /** ...over at least this much exposure in the window, and this many bad... */
  minExposure: number;
  minBad: number;
  /** ...that would come by chance at its baseline's rate less often than this (a negative binomial tail). */
  maxChance: number;
}

/**
 * A cohort whose own rate crossed its condition against its own baseline, for the finding its scope's condition does
 * not make: a device type or an app version of a fifth of a pop that stalls twenty times as often moves the pop's rate
 * less than its floor (Conviva alerts cohorts for this reason). Of the cohorts that cross, the least likely by chance;
 * every cohort of every dimension is tested each minute, so `maxChance` is smaller than a scope's.
 */
export function cohortSpike(
  cur: Fields,
  baseOf: (keep: (field: string) => boolean) => Fields,
  bad: string,
  exposure: string,
  c: CohortCondition,
): Cohort | null {
  // The dimensions with a value that has the window's sample: only theirs are summed over the baseline (most minutes
  // have none, and a baseline's cohort fields are thirty minutes of every value of every dimension).
  const dims = new Set<string>();
  for (const k in cur) {
    if (k[0] !== bad || k.charCodeAt(1) !== 64 /* @ */ || cur[k]! < c.minBad || k.endsWith('=')) continue;
    if ((cur[exposure + k.slice(1)] ?? 0) >= c.minExposure) dims.add(k.slice(2, k.indexOf('=')));
  }
  if (dims.size === 0) return null;
  const base = baseOf((k) => dims.has(k.slice(2, k.indexOf('='))));
  let best: Cohort | null = null;
  let bestChance = c.maxChance;
  for (const [dimension, values] of cohortCounts(cur, base, bad, exposure)) {
    const x = expectations(values, 'rate');
    if (!x) continue;
    for (const [value, [cb, ce, bb, be]] of values) {
      if (value === '' || ce < c.minExposure || cb < c.minBad || be <= 0) continue;
      const rate = (cb / ce) * 100;
      const baseRate = (bb / be) * 100;
      if (rate < c.ratio * baseRate || rate < baseRate + c.minPoints) continue;
      // It must stand out of its scope: most of its dimension's excess, and concentrated against the whole dimension
      // (more than `explain` asks of a cause it names: raising is held to more than naming). When the whole scope
      // moved alike, the scope's own condition speaks for it.
      if (!standing(x, cb, x.expected.get(value)!, 'scope')) continue;
      const chance = negBinomialTail(cb, bb + 1, 1 / (1 + ce / be));
      if (chance >= bestChance) continue;
      bestChance = chance;
      best = {
        dimension,
        value,
        current: round(rate),
        baseline: round(baseRate),
        share: round(cb / x.bad),
        exposure: ce,
      };
    }
  }
  return best;
}
