// `data.cohort` of an alert (docs/alerts.md "Naming the cause"): the detectors write it (each form is pinned against
// this reader in test/alerts/detection.test.ts), the Slack message and the dashboard read it, as JSON from the store
// by then, so defensively. Its measure comes in one of three forms, by what its condition compares.

/** A cohort's measure now and over its baseline, and what it is in words. */
export interface CohortMeasure {
  now: number;
  before: number;
  /** The unit after a number: ' %' or ' ms'. */
  unit: string;
  /** What the numbers are, in words ('' where the alert's own words say it). */
  what: string;
}

const forms: ReadonlyArray<readonly [current: string, baseline: string, unit: string, what: string]> = [
  // Rebuffer and error spikes: the cohort's rate, as its alert's (rebuffering, or failed sessions).
  ['current_rate', 'baseline_rate', ' %', ''],
  // Startup regressions: the cohort's mean startup time.
  ['current_mean_ms', 'baseline_mean_ms', ' ms', 'mean startup'],
  // Completion drops: the cohort's completion.
  ['current_pct', 'baseline_pct', ' %', 'completion'],
];

/** The measure of `data.cohort`, or null when it holds none of the three forms. */
export function cohortMeasure(cohort: Record<string, unknown>): CohortMeasure | null {
  for (const [current, baseline, unit, what] of forms) {
    const now = cohort[current];
    const before = cohort[baseline];
    if (typeof now === 'number' && typeof before === 'number') return { now, before, unit, what };
  }
  return null;
}
