import { parseUuid, uuidWords } from '../bus/event-reader.js';

/** How long a (tenant, event_id) is remembered: CONTRACT §4 "De-duplication". */
export const dedupWindowMs = 24 * 3_600_000;

/** A de-duplication window as a checkpoint keeps it (`DedupWindow.save`). */
export interface SavedDedup {
  tenants: string[];
  /** UUID ids, oldest first, `entryBytes` each: tenant index, the four words (u32), first seen at (f64), little-endian. */
  ids: Uint8Array;
  /** Ids that are not UUIDs, as `tenant \0 id`, with their time, oldest first. */
  other: Array<[string, number]>;
}

const entryBytes = 28;
/** Marks an entry of the ring that was seen again after its window: it no longer is in the table. */
const gone = -Infinity;

/**
 * The (tenant, event_id) pairs seen in the last 24 hours of arrival time, exactly.
 *
 * Ingest lets only UUIDs through as `event_id`, so an id is kept as 128 bits and its tenant's index in two typed
 * arrays rather than as a string in a Map (about 120 bytes an id, and an allocation per event): a ring of entries in
 * arrival order (20 bytes of key, 8 of time), which expiry drops from the front, and an open-addressing table of ring
 * positions (4 bytes a slot, at most half full) to find them. That is 36 bytes an id, up to twice that just after the
 * arrays grow. Ids that are not UUIDs (none from ingest; a test's, an old stream's) go to a Map beside it.
 */
export class DedupWindow {
  private tenantIndex = new Map<string, number>();
  private tenants: string[] = [];
  /** The ring: keys (tenant, w0..w3) and times; `head` is the oldest entry, `count` how many there are. */
  private keys = new Uint32Array(5 * 1024);
  private times = new Float64Array(1024);
  private head = 0;
  private count = 0;
  /** Ring position + 1 of each entry, by hash; 0 is an empty slot. */
  private slots = new Uint32Array(2048);
  /** Entries in the ring still in the table (not `gone`). */
  private live = 0;
  private readonly other = new Map<string, number>();

  /** True, and the id remembered as first seen at `receivedAt`, unless it was seen within the window before. */
  firstSeen(tenant: string, eventId: string, receivedAt: number): boolean {
    const b = Buffer.from(eventId);
    if (eventId.length === b.length && parseUuid(b, 0, b.length))
      return this.firstSeenUuid(tenant, uuidWords[0]!, uuidWords[1]!, uuidWords[2]!, uuidWords[3]!, receivedAt);
    const key = `${tenant}\u0000${eventId}`;
    const at = this.other.get(key);
    if (at !== undefined && receivedAt - at <= dedupWindowMs) return false;
    // New, or past the window but not yet expired: remembered from now, at the back so expiry stays in order.
    this.other.delete(key);
    this.other.set(key, receivedAt);
    return true;
  }

  /** `firstSeen` for an id given as the four 32-bit words of its UUID (what `EventReader` parses). */
  firstSeenUuid(tenant: string, w0: number, w1: number, w2: number, w3: number, receivedAt: number): boolean {
    let t = this.tenantIndex.get(tenant);
    if (t === undefined) {
      t = this.tenants.length;
      this.tenants.push(tenant);
      this.tenantIndex.set(tenant, t);
    }
    const slot = this.find(t, w0, w1, w2, w3);
    const found = this.slots[slot]!;
    if (found !== 0) {
      const at = this.times[found - 1]!;
      if (receivedAt - at <= dedupWindowMs) return false;
      // Past its window but not yet expired: new again, and moved to the back so expiry stays in order.
      this.times[found - 1] = gone;
      this.removeSlot(slot);
    }
    this.push(t, w0, w1, w2, w3, receivedAt);
    return true;
  }

  /** Forget ids first seen more than the window before `now`. */
  expire(now: number): void {
    const cap = this.times.length;
    while (this.count > 0) {
      const i = this.head;
      const at = this.times[i]!;
      if (now - at <= dedupWindowMs) break;
      if (at !== gone) {
        const k = 5 * i;
        this.removeSlot(
          this.find(this.keys[k]!, this.keys[k + 1]!, this.keys[k + 2]!, this.keys[k + 3]!, this.keys[k + 4]!),
        );
      }
      this.head = (i + 1) & (cap - 1);
      this.count--;
    }
    for (const [key, at] of this.other) {
      if (now - at <= dedupWindowMs) break;
      this.other.delete(key);
    }
  }

  get size(): number {
    return this.live + this.other.size;
  }

  /** Every remembered id and its time, oldest first: what a checkpoint keeps. */
  save(): SavedDedup {
    const ids = new Uint8Array(this.live * entryBytes);
    const view = new DataView(ids.buffer);
    let o = 0;
    this.forEachLive((i) => {
      for (let j = 0; j < 5; j++) view.setUint32(o + 4 * j, this.keys[5 * i + j]!, true);
      view.setFloat64(o + 20, this.times[i]!, true);
      o += entryBytes;
    });
    return { tenants: [...this.tenants], ids, other: [...this.other] };
  }

  /** Start from a checkpoint's ids (oldest first), dropping any already past the window at `now`. */
  load(saved: SavedDedup, now: number): void {
    this.reset();
    const { tenants, ids, other } = saved;
    const view = new DataView(ids.buffer, ids.byteOffset, ids.byteLength);
    for (let o = 0; o + entryBytes <= ids.byteLength; o += entryBytes) {
      const at = view.getFloat64(o + 20, true);
      if (now - at > dedupWindowMs) continue;
      const w = (j: number): number => view.getUint32(o + 4 * j, true);
      this.firstSeenUuid(tenants[w(0)]!, w(1), w(2), w(3), w(4), at);
    }
    for (const [key, at] of other) if (now - at <= dedupWindowMs) this.other.set(key, at);
  }

  private reset(): void {
    this.tenantIndex = new Map();
    this.tenants = [];
    this.keys = new Uint32Array(5 * 1024);
    this.times = new Float64Array(1024);
    this.slots = new Uint32Array(2048);
    this.head = this.count = this.live = 0;
    this.other.clear();
  }

  private forEachLive(fn: (ringIndex: number) => void): void {
    const mask = this.times.length - 1;
    for (let n = 0; n < this.count; n++) {
      const i = (this.head + n) & mask;
      if (this.times[i] !== gone) fn(i);
    }
  }

  /** The table slot holding this key, or the empty slot where it would go. */
  private find(t: number, w0: number, w1: number, w2: number, w3: number): number {
    const mask = this.slots.length - 1;
    // The words are random (UUIDs): mixing them with the tenant spreads keys evenly.
    let slot = (Math.imul(w0 ^ Math.imul(t, 0x9e3779b1), 0x85ebca6b) ^ w1 ^ Math.imul(w2, 0xc2b2ae35) ^ w3) & mask;
    for (;;) {
      const v = this.slots[slot]!;
      if (v === 0) return slot;
      const k = 5 * (v - 1);
      if (
        this.keys[k + 1] === w0 &&
        this.keys[k + 2] === w1 &&
        this.keys[k + 3] === w2 &&
        this.keys[k + 4] === w3 &&
        this.keys[k] === t
      )
        return slot;
      slot = (slot + 1) & mask;
    }
  }

  /** Empty a slot, moving later entries of its probe run back so that every key stays reachable (no tombstones). */
  private removeSlot(slot: number): void {
    const mask = this.slots.length - 1;
    this.slots[slot] = 0;
    this.live--;
    let hole = slot;
    for (let j = (slot + 1) & mask; this.slots[j] !== 0; j = (j + 1) & mask) {
      const k = 5 * (this.slots[j]! - 1);
      const home = this.find(this.keys[k]!, this.keys[k + 1]!, this.keys[k + 2]!, this.keys[k + 3]!, this.keys[k + 4]!);
      // `find` stops at the first empty slot, the hole, when the entry's run passes it: then it moves there.
      if (home === hole) {
        this.slots[hole] = this.slots[j]!;
        this.slots[j] = 0;
        hole = j;
      }
    }
  }

  private push(t: number, w0: number, w1: number, w2: number, w3: number, at: number): void {
    if (this.count === this.times.length) this.grow();
    const i = (this.head + this.count) & (this.times.length - 1);
    const k = 5 * i;
    this.keys[k] = t;
    this.keys[k + 1] = w0;
    this.keys[k + 2] = w1;
    this.keys[k + 3] = w2;
    this.keys[k + 4] = w3;
    this.times[i] = at;
    this.count++;
    this.slots[this.find(t, w0, w1, w2, w3)] = i + 1;
    this.live++;
  }

  /** Twice the room: the live entries are copied to the front of a new ring, in order, and the table rebuilt. */
  private grow(): void {
    const cap = this.times.length * 2;
    const keys = new Uint32Array(5 * cap);
    const times = new Float64Array(cap);
    let n = 0;
    const mask = this.times.length - 1;
    for (let k = 0; k < this.count; k++) {
      const i = (this.head + k) & mask;
      const at = this.times[i]!;
      if (at === gone) continue;
      for (let j = 0; j < 5; j++) keys[5 * n + j] = this.keys[5 * i + j]!;
      times[n++] = at;
    }
    this.keys = keys;
    this.times = times;
    this.head = 0;
    this.count = n;
    this.slots = new Uint32Array(2 * cap);
    for (let i = 0; i < n; i++)
      this.slots[this.find(keys[5 * i]!, keys[5 * i + 1]!, keys[5 * i + 2]!, keys[5 * i + 3]!, keys[5 * i + 4]!)] =
        i + 1;
  }
}
