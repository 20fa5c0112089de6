// The retry schedule of the seed (CONTRACT §7), as pure functions of an injected clock and random source.

export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };

/** Waits after the 1st … 6th failed attempt. */
export const retryStepsMs: readonly number[] = [30_000, 120_000, 600_000, 3_600_000, 21_600_000, 86_400_000];
/** The first attempt and six retries: the seventh failure disables the endpoint. */
export const maxAttempts = retryStepsMs.length + 1;
/** Jitter only ever adds, up to 10 % of the step. */
export const maxJitter = 0.1;

/** `Retry-After` as milliseconds from `now`: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, now: number): number | null {
  if (value === null || value === undefined) return null;
  const v = value.trim();
  if (/^\d{1,10}$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/**
 * How long after a failed attempt (1-based) the next one goes, or null when none is left. `retryAfterMs` (only from
 * a 429 or 503) can push the retry later, up to twice the step, never earlier than the step.
 */
export function retryDelayMs(
  failedAttempt: number,
  retryAfterMs: number | null,
  random: () => number = Math.random,
): number | null {
  const step = retryStepsMs[failedAttempt - 1];
  if (step === undefined) return null;
  const jittered = step + Math.floor(step * maxJitter * Math.min(Math.max(random(), 0), 0.999999));
  if (retryAfterMs === null) return jittered;
  return Math.max(jittered, Math.min(retryAfterMs, 2 * step));
}
