/** How long a (tenant, event_id) is remembered: CONTRACT §4 "De-duplication". */
export const dedupWindowMs = 24 * 3_600_000;

/**
 * The (tenant, event_id) pairs seen in the last 24 hours of arrival time, exactly. Entries are kept in arrival order
 * (a Map keeps insertion order), so expiry drops from the front. Memory: about 120 bytes per remembered id with
 * V8's Map and a 36-character UUID; docs/aggregation.md gives the arithmetic per shard.
 */
export class DedupWindow {
  private readonly seen = new Map<string, number>();

  static key(tenant: string, eventId: string): string {
    return `${tenant}\u0000${eventId}`;
  }

  /**
   * True, and the id remembered as first seen at `receivedAt`, unless it was seen within the window before: then
   * false, a duplicate. One key and one lookup per event: this runs for every event a shard reads.
   */
  firstSeen(tenant: string, eventId: string, receivedAt: number): boolean {
    const key = DedupWindow.key(tenant, eventId);
    const at = this.seen.get(key);
    if (at === undefined) {
      this.seen.set(key, receivedAt);
      return true;
    }
    if (receivedAt - at <= dedupWindowMs) return false;
    // Past the window but not yet expired: new again, and moved to the back so expiry stays in order.
    this.seen.delete(key);
    this.seen.set(key, receivedAt);
    return true;
  }

  /** Forget ids first seen more than the window before `now`. */
  expire(now: number): void {
    for (const [key, at] of this.seen) {
      if (now - at <= dedupWindowMs) break;
      this.seen.delete(key);
    }
  }

  /** Every remembered id and its time, oldest first: what a checkpoint keeps. */
  entries(): Array<[string, number]> {
    return [...this.seen];
  }

  /** Start from a checkpoint's entries (oldest first), dropping any already past the window at `now`. */
  load(entries: ReadonlyArray<readonly [string, number]>, now: number): void {
    this.seen.clear();
    for (const [key, at] of entries) if (now - at <= dedupWindowMs) this.seen.set(key, at);
  }

  get size(): number {
    return this.seen.size;
  }
}
