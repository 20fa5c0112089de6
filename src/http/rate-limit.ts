// RateLimit-* headers (IETF draft "RateLimit header fields for HTTP"), as ingest and the API both answer them.

export interface RateState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

export function rateHeaders(rate: RateState): Record<string, string> {
  return {
    'RateLimit-Limit': String(rate.limit),
    'RateLimit-Remaining': String(rate.remaining),
    'RateLimit-Reset': String(rate.resetSeconds),
  };
}

/** Seconds from `now` to the end of its UTC minute (at least 1). */
export const secondsToNextMinute = (now: number): number => Math.max(1, Math.ceil((60_000 - (now % 60_000)) / 1000));

/** What a minute limiter counts with: `UsageCounters` shares the counts between processes through NATS KV. */
export interface MinuteCounts {
  minuteUsed(key: string, now?: number): number;
  add(key: string, n: number, now?: number): void;
}

/**
 * Fixed one-minute UTC windows per key. With shared counts, processes see each other's requests about one sync
 * interval late, so a burst spread over several processes can overshoot by what they serve in that interval.
 */
export class MinuteLimiter {
  constructor(
    private readonly limit: number,
    private readonly counts: MinuteCounts,
  ) {}

  /** Count one request for `key`; `allowed` is false past the limit (refused requests count too). */
  take(key: string, now = Date.now(), limit = this.limit): RateState & { allowed: boolean } {
    const used = this.counts.minuteUsed(key, now) + 1;
    this.counts.add(key, 1, now);
    return {
      allowed: used <= limit,
      limit,
      remaining: Math.max(0, limit - used),
      resetSeconds: secondsToNextMinute(now),
    };
  }
}
