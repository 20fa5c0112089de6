// RateLimit-* headers (IETF draft "RateLimit header fields for HTTP"), as ingest and the API both answer them.

export interface RateState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

export function rateHeaders(rate: RateState): Record<string, string> {
  return { 'RateLimit-Limit': String(rate.limit), 'RateLimit-Remaining': String(rate.remaining), 'RateLimit-Reset': String(rate.resetSeconds) };
}

/** Seconds from `now` to the end of its UTC minute (at least 1). */
export const secondsToNextMinute = (now: number): number => Math.max(1, Math.ceil((60_000 - (now % 60_000)) / 1000));

/**
 * Fixed one-minute windows per key, in this process. Keys of past minutes are dropped as the minute turns, so memory
 * holds only the keys seen this minute.
 */
export class MinuteLimiter {
  private minute = -1;
  private counts = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** Count one request for `key`; `allowed` is false past the limit (refused requests count too). */
  take(key: string, now = Date.now()): RateState & { allowed: boolean } {
    const minute = Math.floor(now / 60_000);
    if (minute !== this.minute) {
      this.minute = minute;
      this.counts = new Map();
    }
    const used = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, used);
    return { allowed: used <= this.limit, limit: this.limit, remaining: Math.max(0, this.limit - used), resetSeconds: secondsToNextMinute(now) };
  }
}
