import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pipelines } from '../../pipelines/index.js';
import { defaultConfigDir } from '../config/load.js';
import { ControlError } from '../control/kv-records.js';
import { windowSpans, type Detector, type WindowDetector } from './detector.js';

/** Thresholds per category and name: config/alerts.json, or a tenant's overrides of some of them. */
export type Thresholds = Record<string, Record<string, number>>;

export const detectors: readonly Detector[] = pipelines.flatMap((p) => p.detectors ?? []);

const windowDetectors = new Map(
  detectors.filter((d): d is WindowDetector => d.kind === 'window').map((d) => [d.category, d]),
);

/**
 * What is wrong with thresholds, or null. `complete` (config/alerts.json) needs every threshold of every window
 * detector; an override may name some. A window and its baseline must fit in the history a detector keeps.
 */
export function thresholdsProblem(value: unknown, complete: boolean, base: Thresholds = {}): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'alert thresholds must be an object of categories';
  const given = value as Record<string, unknown>;
  for (const [category, params] of Object.entries(given)) {
    const d = windowDetectors.get(category);
    if (!d)
      return `alert thresholds: unknown category ${JSON.stringify(category.slice(0, 64))}; categories with thresholds: ${[...windowDetectors.keys()].join(', ')}`;
    if (typeof params !== 'object' || params === null || Array.isArray(params))
      return `alert thresholds: ${category} must be an object of thresholds`;
    for (const [name, v] of Object.entries(params)) {
      if (!Object.hasOwn(d.params, name))
        return `alert thresholds: ${category} has no threshold ${JSON.stringify(name.slice(0, 64))}; it has ${Object.keys(d.params).join(', ')}`;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
        return `alert thresholds: ${category}.${name} must be a number, 0 or more`;
    }
  }
  for (const d of windowDetectors.values()) {
    const merged = { ...base[d.category], ...(given[d.category] as Record<string, number> | undefined) };
    if (complete) {
      const missing = Object.keys(d.params).find((n) => merged[n] === undefined);
      if (missing) return `alert thresholds: ${d.category}.${missing} is missing`;
    }
    const longest = Math.max(
      ...windowSpans({ ...merged, window_minutes: merged.window_minutes ?? d.bucketSeconds / 60 }),
    );
    const span = longest + (merged.baseline_minutes ?? 0) + (merged.guard_minutes ?? 0);
    const held = Math.floor(((d.historyBuckets - 1) * d.bucketSeconds) / 60);
    if (span > held)
      return `alert thresholds: ${d.category} the longest window + baseline_minutes${'guard_minutes' in d.params ? ' + guard_minutes' : ''} must be at most ${held}`;
    const wholeMinutes: Array<[name: string, least: number]> = [
      ['min_window_minutes', 1],
      ['window_minutes', 1],
      ['max_window_minutes', 1],
      ['guard_minutes', 0],
    ];
    for (const [name, least] of wholeMinutes) {
      const v = merged[name];
      if (v !== undefined && !(Number.isInteger(v) && v >= least))
        return `alert thresholds: ${d.category}.${name} must be a whole number, ${least} or more`;
    }
    // 0 would say a region's level never moves beyond chance, which its drifting minutes do not bear out.
    if (merged.drift !== undefined && !(merged.drift > 0))
      return `alert thresholds: ${d.category}.drift must be above 0`;
  }
  return null;
}

/** config/alerts.json (in the config folder beside default.json), checked whole. */
export function loadThresholds(dir = defaultConfigDir()): Thresholds {
  const path = join(dir, 'alerts.json');
  const value: unknown = JSON.parse(readFileSync(path, 'utf8'));
  const problem = thresholdsProblem(value, true);
  if (problem) throw new Error(`config: ${path}: ${problem}`);
  return value as Thresholds;
}

/**
 * A tenant's overrides (null: none), checked against the detectors and config/alerts.json before they are stored,
 * by the api and the CLI: the control plane stores them without loading the pipelines.
 */
export function checkOverrides(value: Thresholds | null | undefined): void {
  if (!value) return;
  const problem = thresholdsProblem(value, false, loadThresholds());
  if (problem) throw new ControlError('invalid_request', problem);
}

/** A tenant's thresholds for one category: the defaults with its overrides on top. */
export function effective(
  defaults: Thresholds,
  overrides: Thresholds | null | undefined,
  category: string,
): Record<string, number> {
  const o = overrides?.[category];
  return o ? { ...defaults[category], ...o } : (defaults[category] ?? {});
}
