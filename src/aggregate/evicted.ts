const dayMs = 86_400_000;

/** For how many days of the shard's clock, at least, a session that left memory is remembered (docs/aggregation.md). */
export const evictedDays = 7;

/** A remembered day as a checkpoint keeps it: the day (of the shard's clock) and its digests, sorted, as float64 bytes. */
export type SavedEvicted = Array<[day: number, digests: Uint8Array]>;

/** Bits per remembered session in the filter before the exact check: with two probes, about 1.4 % pass it wrongly. */
const bitsPerKey = 16;
const minBitsLog2 = 16;

/**
 * A 53-bit digest of a session's (tenant, id), read without joining the two strings (cyrb53, public domain): it runs
 * for every event once a shard has let a session go.
 */
export function sessionDigest(tenant: string, id: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < tenant.length; i++) {
    const ch = tenant.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  // The separator, a 0 character: tenant "a", id "bc" and tenant "ab", id "c" differ.
  h1 = Math.imul(h1, 2654435761);
  h2 = Math.imul(h2, 1597334677);
  for (let i = 0; i < id.length; i++) {
    const ch = id.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/**
 * The sessions a shard let go of in the last `evictedDays` days, so that one continuing with recent events after a
 * long pause is recalled from the store instead of starting afresh. Each is kept as a 53-bit digest, 8 bytes, behind
 * a bit filter of 2 to 4 bytes, so the usual event (a session never let go) costs a digest and two bit reads. A new session
 * is taken for one of n remembered with a chance of n / 2^53, which costs a store read that finds nothing. Days are
 * added to by the eviction sweep, which the shard's clock drives, so a replay rebuilds the same set.
 */
export class EvictedSessions {
  /** Earlier days, sorted for binary search. */
  private sealed = new Map<number, Float64Array>();
  private today = new Set<number>();
  private day = -Infinity;
  private bits = new Uint32Array(1 << (minBitsLog2 - 5));
  private bitsLog2 = minBitsLog2;
  private count = 0;

  /** How many sessions are remembered. */
  get size(): number {
    return this.count;
  }

  has(tenant: string, id: string): boolean {
    if (this.count === 0) return false;
    const digest = sessionDigest(tenant, id);
    if (!this.mayHave(digest)) return false;
    if (this.today.has(digest)) return true;
    for (const digests of this.sealed.values()) if (contains(digests, digest)) return true;
    return false;
  }

  /** Remember a session that left memory at `now` (the shard's clock); days past the limit are forgotten. */
  add(tenant: string, id: string, now: number): void {
    const day = Math.floor(now / dayMs);
    if (day !== this.day) {
      if (this.today.size > 0) this.sealed.set(this.day, Float64Array.from(this.today).sort());
      this.today = new Set();
      this.day = day;
      let expired = false;
      // The day a session left, and the `evictedDays` after it: at least that many whole days.
      for (const d of this.sealed.keys()) {
        if (d >= day - evictedDays) continue;
        this.sealed.delete(d);
        expired = true;
      }
      if (expired) this.rebuild();
    }
    const digest = sessionDigest(tenant, id);
    if (this.today.has(digest)) return;
    this.today.add(digest);
    this.count++;
    if (this.count * bitsPerKey > 2 ** this.bitsLog2) this.rebuild();
    else this.mark(digest);
  }

  save(): SavedEvicted {
    const days: SavedEvicted = [...this.sealed].map(([day, d]) => [
      day,
      new Uint8Array(d.buffer, d.byteOffset, d.byteLength),
    ]);
    if (this.today.size > 0) days.push([this.day, new Uint8Array(Float64Array.from(this.today).sort().buffer)]);
    return days;
  }

  /** Start from a checkpoint's days; the latest is the one still being added to. */
  load(saved: SavedEvicted): void {
    this.sealed.clear();
    this.today = new Set();
    this.day = -Infinity;
    for (const [day, bytes] of saved) {
      // Copied: a checkpoint's bytes need not be 8-byte aligned.
      this.sealed.set(day, new Float64Array(Uint8Array.from(bytes).buffer));
      if (day > this.day) this.day = day;
    }
    const latest = this.sealed.get(this.day);
    if (latest) {
      this.sealed.delete(this.day);
      this.today = new Set(latest);
    }
    this.rebuild();
  }

  /** The filter sized for what is remembered now, and filled from it. */
  private rebuild(): void {
    this.count = this.today.size;
    for (const d of this.sealed.values()) this.count += d.length;
    this.bitsLog2 = Math.min(31, Math.max(minBitsLog2, Math.ceil(Math.log2(Math.max(1, this.count * bitsPerKey * 2)))));
    this.bits = new Uint32Array(2 ** (this.bitsLog2 - 5));
    for (const digest of this.today) this.mark(digest);
    for (const digests of this.sealed.values()) for (const digest of digests) this.mark(digest);
  }

  // The filter's two bits of a digest (firstBit, secondBit), computed apart rather than returned as a pair: `mayHave`
  // runs per event, and most answers need only the first.
  private mark(digest: number): void {
    const mask = 2 ** this.bitsLog2 - 1;
    const a = firstBit(digest, mask);
    const b = secondBit(digest, mask);
    this.bits[a >>> 5]! |= 1 << (a & 31);
    this.bits[b >>> 5]! |= 1 << (b & 31);
  }

  private mayHave(digest: number): boolean {
    const mask = 2 ** this.bitsLog2 - 1;
    const a = firstBit(digest, mask);
    if ((this.bits[a >>> 5]! & (1 << (a & 31))) === 0) return false;
    const b = secondBit(digest, mask);
    return (this.bits[b >>> 5]! & (1 << (b & 31))) !== 0;
  }
}

/** A digest's first bit in the filter: its low 32 bits. */
const firstBit = (digest: number, mask: number): number => (digest >>> 0) & mask;

/** Its second: the high 21 bits mixed with the low ones. */
const secondBit = (digest: number, mask: number): number =>
  (Math.imul(Math.floor(digest / 4294967296) ^ (digest >>> 11), 0x85ebca6b) >>> 0) & mask;

function contains(sorted: Float64Array, x: number): boolean {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = sorted[mid]!;
    if (v === x) return true;
    if (v < x) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}
