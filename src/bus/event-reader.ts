import {
  absent,
  afterCountHeader,
  countAt,
  isMap,
  keyMatcher,
  messageEvents,
  num,
  readNum,
  readStr,
  skipValue,
  strLength,
  strStart,
  text,
  valueAt,
} from './msgpack-read.js';
import type { WireEvent } from './wire.js';

// A reader of the event stream's messages (docs/wire-format.md) for the aggregators, which read every event of their
// shard. It walks the MessagePack bytes once and fills one object of a single shape per event, where msgpackr builds
// a map object of whichever keys the event has (a heartbeat's shape differs from a play_start's, and every access
// site that sees both goes megamorphic), a nested object for `context`, and a new string for every value.
// - Strings of few distinct values (tenant, type, country, region, device, pop, content) are interned: bytes seen
//   before give back the same string, without decoding or allocating.
// - `event_id` is parsed into four 32-bit words, what de-duplication keys by; its string is made only if asked for.
// - What the aggregator rarely reads (user and anonymous ids, title, context, properties) is decoded when read.
// Its answers equal msgpackr's for every field of `WireEvent` (test/unit/event-reader.test.ts); keys it does not know
// are skipped, since nothing downstream reads them.

const hex = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  hex['0123456789abcdef'.charCodeAt(i)] = i;
  hex['0123456789ABCDEF'.charCodeAt(i)] = i;
}

/** Words of the last UUID `parseUuid` read. */
export const uuidWords = new Uint32Array(4);

/**
 * Parse a UUID (8-4-4-4-12 hex digits, either case) at `b[start..start+36)` into `uuidWords`; false for anything
 * else. De-duplication keys by these 128 bits instead of a string.
 */
export function parseUuid(b: Uint8Array, start: number, length: number): boolean {
  if (
    length !== 36 ||
    b[start + 8] !== 0x2d ||
    b[start + 13] !== 0x2d ||
    b[start + 18] !== 0x2d ||
    b[start + 23] !== 0x2d
  )
    return false;
  let word = 0;
  let digits = 0;
  let w = 0;
  for (let i = start; i < start + 36; i++) {
    const at = i - start;
    if (at === 8 || at === 13 || at === 18 || at === 23) continue;
    const d = hex[b[i]!]!;
    if (d < 0) return false;
    word = (word << 4) | d;
    if (++digits === 8) {
      uuidWords[w++] = word >>> 0;
      word = 0;
      digits = 0;
    }
  }
  return true;
}

/**
 * Strings by their bytes, for the fields of few distinct values: a hit costs a hash of the bytes and a comparison.
 * Open addressing over a fixed table; once the probed slots are taken, a string is decoded without being kept, so a
 * field of many distinct values (hostile, or a vast catalogue) costs memory no more than the table.
 */
class Interner {
  private readonly mask: number;
  private readonly hashes: Int32Array;
  private readonly strings: Array<string | undefined>;
  private readonly bytes: Array<Uint8Array | undefined>;

  constructor(bits: number) {
    this.mask = (1 << bits) - 1;
    this.hashes = new Int32Array(1 << bits);
    this.strings = new Array<string | undefined>(1 << bits).fill(undefined);
    this.bytes = new Array<Uint8Array | undefined>(1 << bits).fill(undefined);
  }

  get(b: Buffer, start: number, length: number): string {
    if (length > 64) return text(b, start, length);
    let h = 0x811c9dc5 | 0;
    for (let i = start; i < start + length; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
    let slot = h & this.mask;
    for (let probe = 0; probe < 8; probe++, slot = (slot + 1) & this.mask) {
      const s = this.strings[slot];
      if (s === undefined) {
        const v = text(b, start, length);
        this.strings[slot] = v;
        this.hashes[slot] = h;
        this.bytes[slot] = new Uint8Array(b.subarray(start, start + length));
        return v;
      }
      if (this.hashes[slot] !== h) continue;
      const k = this.bytes[slot]!;
      if (k.length !== length) continue;
      let i = 0;
      while (i < length && k[i] === b[start + i]) i++;
      if (i === length) return s;
    }
    return text(b, start, length);
  }
}

/** The fields read when asked for, not with the event. */
const Lazy = { event_id: 0, user_id: 1, anonymous_id: 2, content_title: 3, context: 4, properties: 5 } as const;
type Lazy = (typeof Lazy)[keyof typeof Lazy];
const lazyFields = Object.keys(Lazy).length;

/**
 * One event of a message, as `EventReader` read it. Every instance has the same fields in the same order; the
 * rarely read ones are byte ranges in the message, decoded by their getters.
 */
export class ReadEvent implements WireEvent {
  tenant = '';
  env: WireEvent['env'] = 'production';
  event_type = '';
  ts = 0;
  client_ts: number | null = null;
  received_at = 0;
  country = '';
  region = '';
  device = '';
  session_id: string | undefined = undefined;
  content_id: string | undefined = undefined;
  content_type: string | undefined = undefined;
  position_sec: number | undefined = undefined;
  bitrate_kbps: number | undefined = undefined;
  /** `context.pop`, `app_version` and `player`, read with the event: session attributes; `cdn`, a segment value. */
  pop: string | undefined = undefined;
  app_version: string | undefined = undefined;
  player: string | undefined = undefined;
  cdn: string | undefined = undefined;
  /** `event_id` as 128 bits, when it is a UUID (`uuid`). */
  uuid = false;
  id0 = 0;
  id1 = 0;
  id2 = 0;
  id3 = 0;
  /** Where the value of each lazily read field (`Lazy`) starts and ends in the message, or `absent`. */
  private readonly ranges = new Int32Array(2 * lazyFields).fill(absent);
  private props: Record<string, unknown> | undefined = undefined;
  private propsRead = false;

  constructor(private buf: Buffer) {}

  /** Back to an event with no fields, over another message (events are reused from one message to the next). */
  private reset(buf: Buffer): void {
    this.buf = buf;
    this.tenant = this.event_type = this.country = this.region = this.device = '';
    this.env = 'production';
    this.ts = this.received_at = 0;
    this.client_ts = null;
    this.session_id =
      this.content_id =
      this.content_type =
      this.pop =
      this.app_version =
      this.player =
      this.cdn =
        undefined;
    this.position_sec = this.bitrate_kbps = undefined;
    this.uuid = false;
    this.ranges.fill(absent);
    this.props = undefined;
    this.propsRead = false;
  }

  private lazy(field: Lazy): unknown {
    const at = this.ranges[2 * field]!;
    if (at === absent) return undefined;
    const end = this.ranges[2 * field + 1]!;
    return readStr(this.buf, at) === end ? text(this.buf, strStart, strLength) : valueAt(this.buf, at, end);
  }

  get event_id(): string | undefined {
    return this.lazy(Lazy.event_id) as string | undefined;
  }

  get user_id(): string | undefined {
    return this.lazy(Lazy.user_id) as string | undefined;
  }

  get anonymous_id(): string | undefined {
    return this.lazy(Lazy.anonymous_id) as string | undefined;
  }

  get content_title(): string | undefined {
    return this.lazy(Lazy.content_title) as string | undefined;
  }

  get context(): Record<string, string> | undefined {
    return this.lazy(Lazy.context) as Record<string, string> | undefined;
  }

  /** Read at most once: rank, qos and content each look at it. */
  get properties(): Record<string, unknown> | undefined {
    if (!this.propsRead) {
      this.props = this.lazy(Lazy.properties) as Record<string, unknown> | undefined;
      this.propsRead = true;
    }
    return this.props;
  }

  /** Whether the event carries an `event_id`, without decoding it. */
  get hasEventId(): boolean {
    return this.ranges[2 * Lazy.event_id] !== absent;
  }

  /**
   * Read the event's map at `p`; answers the position after it. A known field whose value is not of the type the
   * wire format gives it is read as msgpackr reads it, so the event still equals msgpackr's.
   */
  read(b: Buffer, p: number, strings: Interner): number {
    this.reset(b);
    if (!isMap(b, p)) throw new Error(`event stream message: an event at ${p} is not a map`);
    const n = countAt(b, p);
    p = afterCountHeader(b, p);
    for (let k = 0; k < n; k++) {
      const v = readStr(b, p);
      if (v < 0) {
        // A key that is not a string names no field of ours: skip it and its value.
        p = skipValue(b, skipValue(b, p));
        continue;
      }
      const key = keyOf(b, strStart, strLength);
      const at = v;
      const end = skipValue(b, at);
      p = end;
      switch (key) {
        case Key.tenant:
          this.tenant = this.str(at, end, strings) as string;
          break;
        case Key.env:
          this.env = this.str(at, end, strings) as WireEvent['env'];
          break;
        case Key.event_type:
          this.event_type = this.str(at, end, strings) as string;
          break;
        case Key.country:
          this.country = this.str(at, end, strings) as string;
          break;
        case Key.region:
          this.region = this.str(at, end, strings) as string;
          break;
        case Key.device:
          this.device = this.str(at, end, strings) as string;
          break;
        case Key.content_id:
          this.content_id = this.str(at, end, strings) as string | undefined;
          break;
        case Key.content_type:
          this.content_type = this.str(at, end, strings) as string | undefined;
          break;
        case Key.session_id:
          this.session_id = (readStr(b, at) === end ? text(b, strStart, strLength) : valueAt(b, at, end)) as
            string | undefined;
          break;
        case Key.ts:
          this.ts = this.num(at, end) as number;
          break;
        case Key.client_ts:
          this.client_ts = this.num(at, end) as number | null;
          break;
        case Key.received_at:
          this.received_at = this.num(at, end) as number;
          break;
        case Key.position_sec:
          this.position_sec = this.num(at, end) as number | undefined;
          break;
        case Key.bitrate_kbps:
          this.bitrate_kbps = this.num(at, end) as number | undefined;
          break;
        case Key.event_id:
          this.keep(Lazy.event_id, at, end);
          this.uuid = readStr(b, at) === end && parseUuid(b, strStart, strLength);
          if (this.uuid) {
            this.id0 = uuidWords[0]!;
            this.id1 = uuidWords[1]!;
            this.id2 = uuidWords[2]!;
            this.id3 = uuidWords[3]!;
          }
          break;
        case Key.user_id:
          this.keep(Lazy.user_id, at, end);
          break;
        case Key.anonymous_id:
          this.keep(Lazy.anonymous_id, at, end);
          break;
        case Key.content_title:
          this.keep(Lazy.content_title, at, end);
          break;
        case Key.properties:
          this.keep(Lazy.properties, at, end);
          this.propsRead = false;
          break;
        case Key.context:
          this.keep(Lazy.context, at, end);
          readContext(b, at, strings, this);
          break;
      }
    }
    return p;
  }

  private keep(field: Lazy, at: number, end: number): void {
    this.ranges[2 * field] = at;
    this.ranges[2 * field + 1] = end;
  }

  private str(at: number, end: number, strings: Interner): unknown {
    return readStr(this.buf, at) === end ? strings.get(this.buf, strStart, strLength) : valueAt(this.buf, at, end);
  }

  private num(at: number, end: number): unknown {
    return readNum(this.buf, at) === end ? num : valueAt(this.buf, at, end);
  }
}

/** The fields of `WireEvent`, by key. */
const Key = {
  other: 0,
  tenant: 1,
  env: 2,
  event_type: 3,
  ts: 4,
  client_ts: 5,
  received_at: 6,
  event_id: 7,
  country: 8,
  region: 9,
  device: 10,
  anonymous_id: 11,
  user_id: 12,
  session_id: 13,
  content_id: 14,
  content_type: 15,
  content_title: 16,
  position_sec: 17,
  bitrate_kbps: 18,
  context: 19,
  properties: 20,
} as const;
type Key = (typeof Key)[keyof typeof Key];

const keyOf = keyMatcher(
  Object.entries(Key).filter(([, key]) => key !== Key.other),
  Key.other,
);

/** The `context` keys read with the event (session attributes): a name's bytes and the field it fills. */
type ContextKey = 'pop' | 'app_version' | 'player' | 'cdn';
const contextKeys: ReadonlyArray<readonly [Buffer, ContextKey]> = (
  ['pop', 'app_version', 'player', 'cdn'] as const
).map((k) => [Buffer.from(k), k] as const);

/**
 * `context.pop`, `app_version`, `player` and `cdn` into `e`, when `context` is a map (as msgpackr reads it: the last
 * one wins), without decoding the rest of it; their strings are interned.
 */
function readContext(b: Buffer, at: number, strings: Interner, e: ReadEvent): void {
  if (!isMap(b, at)) {
    const c = valueAt(b, at, skipValue(b, at)) as Record<string, unknown> | null | undefined;
    for (const [, k] of contextKeys) e[k] = c?.[k] as string | undefined;
    return;
  }
  const n = countAt(b, at);
  let p = afterCountHeader(b, at);
  for (let k = 0; k < n; k++) {
    const v = readStr(b, p);
    let field: ContextKey | undefined;
    if (v >= 0) {
      // Length and first byte first: most keys (os, ip, …) are told apart without a call.
      for (const [name, f] of contextKeys)
        if (
          strLength === name.length &&
          b[strStart] === name[0] &&
          b.compare(name, 0, name.length, strStart, strStart + strLength) === 0
        )
          field = f;
    }
    const at2 = v >= 0 ? v : skipValue(b, p);
    const end = skipValue(b, at2);
    if (field)
      e[field] = (readStr(b, at2) === end ? strings.get(b, strStart, strLength) : valueAt(b, at2, end)) as
        string | undefined;
    p = end;
  }
}

/**
 * Reads event stream messages; one per aggregator shard, which keeps its interned strings. The events of a read are
 * valid until the next: their objects are used again (a message's 500 events would otherwise be some 200 KB of
 * garbage), and they read their rarely read fields from `data`, which must not change meanwhile.
 */
export class EventReader {
  private readonly strings = new Interner(14);
  private readonly pool: ReadEvent[] = [];

  read(data: Uint8Array): { v: number; events: ReadEvent[] } {
    const { b, v, at, count } = messageEvents(data);
    const events: ReadEvent[] = [];
    let p = at;
    for (let i = 0; i < count; i++) {
      if (i === this.pool.length) this.pool.push(new ReadEvent(b));
      const e = this.pool[i]!;
      p = e.read(b, p, this.strings);
      events.push(e);
    }
    return { v, events };
  }
}

/** An event's `context.<key>` of those read with the event by this reader, looked up in `context` for any other event. */
export function contextAttr(e: WireEvent, key: ContextKey): string | undefined {
  return e instanceof ReadEvent ? e[key] : e.context?.[key];
}
