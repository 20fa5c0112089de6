import type { Fields } from '../aggregate/pipeline.js';

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
}

/** A detector's view of one key's signal history, at the bucket being evaluated. */
export interface Window {
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
  /** Whether the bucket starting at `start` was found firing when it was evaluated (baselines leave those out). */
  firing(start: number): boolean;
  /** The name a once detector's `label` gave an id of this tenant (a content's title), or ''. */
  label(id: string): string;
  /** The tenant's thresholds for this category: config/alerts.json with its overrides. */
  thresholds: Readonly<Record<string, number>>;
}

/**
 * A condition over windows of a signal's buckets (rebuffer spike, error spike, payment failure, ...). The engine
 * sums the shards' signals per key and bucket, evaluates each bucket that changes, and raises an alert once per
 * incident when `running` consecutive buckets fire; it resolves it once none has fired for 5 minutes.
 */
export interface WindowDetector {
  kind: 'window';
  category: string;
  source: AlertSource;
  signal: string;
  /** Bucket length in minutes: 1, or 60 for hourly conditions. */
  bucketMinutes: number;
  /** Buckets of history kept per key: the window and the baseline behind it. */
  historyBuckets: number;
  /** Consecutive firing buckets before an alert is raised. */
  running: number;
  /** Threshold names and what each means (defaults in config/alerts.json). */
  params: Readonly<Record<string, string>>;
  /** A finding when the window ending with `w.bucket` meets the condition, else null. */
  evaluate(w: Window): Finding | null;
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

/** Σ of each field over buckets [from, to) (step apart), leaving out firing buckets when asked. */
export function sumFields(w: Window, from: number, to: number, skipFiring = false): Fields {
  const out: Fields = {};
  for (let b = from; b < to; b += w.step) {
    if (skipFiring && w.firing(b)) continue;
    const f = w.at(b);
    if (f) for (const k in f) out[k] = (out[k] ?? 0) + f[k]!;
  }
  return out;
}

/** Σ of each field over the `minutes` one-minute buckets ending with `w.bucket`. */
export function windowFields(w: Window, minutes: number): Fields {
  return sumFields(w, w.bucket - (minutes - 1) * 60, w.bucket + 60);
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

/**
 * P(X ≥ k) for X ~ Poisson(λ): how often a count at least this high comes by chance when λ is expected. Summed from
 * k upward in log space until the terms stop counting (k is a count of sessions in a window: small).
 */
export function poissonTail(k: number, lambda: number): number {
  if (k <= 0) return 1;
  if (lambda <= 0) return 0;
  let logTerm = -lambda;
  for (let i = 1; i <= k; i++) logTerm += Math.log(lambda / i);
  let sum = 0;
  for (let i = k; ; i++) {
    const term = Math.exp(logTerm);
    sum += term;
    if (term < sum * 1e-12 || i > k + 10_000) break;
    logTerm += Math.log(lambda / (i + 1));
  }
  return Math.min(1, sum);
}
