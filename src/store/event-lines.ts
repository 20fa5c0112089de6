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
  valueAt,
} from '../bus/msgpack-read.js';
import type { WireEvent } from '../bus/wire.js';
import { eventColumns, eventLine } from './events.js';
import { needsEscape, TsvLines, tsvMs, tsvString } from './tsv.js';

// The `events` table's lines written straight from the event stream's MessagePack (docs/wire-format.md), for the
// flusher, which stores every event: a string's bytes are copied, escaped, into the body, with no object and no
// string per event (decoding each event and building its line were most of the flusher's own CPU). An event with a
// field of a type the wire format does not give it is decoded and written by `eventLine`, so every line equals
// `eventLine` of the event as msgpackr decodes it (test/store/event-lines.test.ts).

const column = Object.fromEntries(eventColumns.map((name, i) => [name, i])) as Record<
  (typeof eventColumns)[number],
  number
>;
const columns = eventColumns.length;

/** Top-level keys: a column of their own, or these. */
const contextKey = columns;
const other = -1;
const topKeyOf = keyMatcher<number>(
  [
    ...eventColumns.slice(0, column.app_version).map((name) => [name, column[name]] as const),
    ['context', contextKey],
    ['properties', column.properties],
  ],
  other,
);
/** `context` keys kept as columns (the others, `ip` among them, are not stored). */
const contextKeyOf = keyMatcher<number>(
  eventColumns.slice(column.app_version, column.properties).map((name) => [name, column[name]] as const),
  other,
);

/** How each column's value is written (as `eventLine` writes it); `properties`, the sequence and index apart. */
const Kind = { string: 0, raw: 1, ms: 2, msOrNull: 3, text: 4, count: 5 } as const;
const kinds = Uint8Array.from(eventColumns, (name) => {
  if (name === 'env') return Kind.raw;
  if (name === 'ts' || name === 'received_at') return Kind.ms;
  if (name === 'client_ts') return Kind.msOrNull;
  if (name === 'position_sec' || name === 'bitrate_kbps') return Kind.count;
  if (['tenant', 'event_type', 'country', 'region', 'device'].includes(name)) return Kind.string;
  return Kind.text;
});

/** What a column's value is in the event being read. */
const Type = { absent: 0, str: 1, num: 2, nil: 3, other: 4 } as const;
const nil = 0xc0;

/** Events-table lines (TabSeparated, `eventColumns`) of event stream messages, gathered into one body. */
export class EventLines {
  readonly body = new TsvLines();
  /** Lines written. */
  count = 0;
  /** Per column of the event being read: its value's `Type`, a string's bytes (`at`, `length`) or a number. */
  private readonly type = new Uint8Array(columns);
  private readonly at = new Int32Array(columns);
  private readonly length = new Int32Array(columns);
  private readonly num = new Float64Array(columns);
  /** Where `properties` is ([at, end)), when it is neither absent, nil nor an empty map. */
  private propsAt = absent;
  private propsEnd = 0;

  /** Each event of an event stream message, but those at `dropped`, as the line of (ingestSeq, its index). */
  add(data: Uint8Array, ingestSeq: number, dropped: readonly number[]): void {
    const { b, at, count } = messageEvents(data);
    const skip = dropped.length > 0 ? new Set(dropped) : null;
    let p = at;
    for (let i = 0; i < count; i++) {
      const next = skipValue(b, p);
      if (!skip?.has(i)) this.event(b, p, next, ingestSeq, i);
      p = next;
    }
  }

  private event(b: Buffer, start: number, end: number, ingestSeq: number, index: number): void {
    if (!this.read(b, start) || !this.fits(b))
      this.body.push(eventLine(valueAt(b, start, end) as WireEvent, ingestSeq, index));
    else this.write(b, ingestSeq, index);
    this.count++;
  }

  /** The event's fields into the columns; false when it is not a map, or its `context` is neither a map nor nil. */
  private read(b: Buffer, p: number): boolean {
    this.type.fill(Type.absent);
    this.propsAt = absent;
    if (!isMap(b, p)) return false;
    const n = countAt(b, p);
    p = afterCountHeader(b, p);
    for (let k = 0; k < n; k++) {
      const v = readStr(b, p);
      const key = v >= 0 ? topKeyOf(b, strStart, strLength) : other;
      const at = v >= 0 ? v : skipValue(b, p);
      p = skipValue(b, at);
      if (key === other) continue;
      if (key === column.properties) {
        const empty = b[at] === nil || isUndefined(b, at) || (isMap(b, at) && countAt(b, at) === 0);
        this.propsAt = empty ? absent : at;
        this.propsEnd = p;
      } else if (key !== contextKey) this.value(key, b, at, p);
      else {
        // As msgpackr reads it, the last `context` wins whole.
        this.type.fill(Type.absent, column.app_version, column.properties);
        if (b[at] === nil || isUndefined(b, at)) continue;
        if (!isMap(b, at)) return false;
        const m = countAt(b, at);
        let q = afterCountHeader(b, at);
        for (let j = 0; j < m; j++) {
          const w = readStr(b, q);
          const c = w >= 0 ? contextKeyOf(b, strStart, strLength) : other;
          const vat = w >= 0 ? w : skipValue(b, q);
          q = skipValue(b, vat);
          if (c !== other) this.value(c, b, vat, q);
        }
      }
    }
    return true;
  }

  /** Column `c`'s value at [at, end). */
  private value(c: number, b: Buffer, at: number, end: number): void {
    if (readStr(b, at) === end) {
      this.type[c] = Type.str;
      this.at[c] = strStart;
      this.length[c] = strLength;
    } else if (b[at] === nil) this.type[c] = Type.nil;
    // `undefined` (msgpackr's fixext) reads as the field's absence, as it does in `eventLine`.
    else if (isUndefined(b, at)) this.type[c] = Type.absent;
    // A 64-bit integer msgpackr may give as a BigInt: left to it.
    else if (b[at] !== 0xcf && b[at] !== 0xd3 && readNum(b, at) === end) {
      this.type[c] = Type.num;
      this.num[c] = num;
    } else this.type[c] = Type.other;
  }

  /** Whether every column's value is of the type the wire format gives it, so `write` writes what `eventLine` would. */
  private fits(b: Buffer): boolean {
    const type = this.type;
    for (let c = 0; c < column.properties; c++) {
      const t = type[c]!;
      switch (kinds[c]) {
        case Kind.string:
          if (t !== Type.str) return false;
          break;
        case Kind.raw:
          // Written as it is by `eventLine`, escaped here: the same only when there is nothing to escape.
          if (t !== Type.str || needsEscape(b, this.at[c]!, this.length[c]!)) return false;
          break;
        case Kind.text:
          if (t !== Type.str && t !== Type.absent) return false;
          break;
        case Kind.ms:
          if (t !== Type.num) return false;
          break;
        case Kind.msOrNull:
          if (t !== Type.num && t !== Type.nil) return false;
          break;
        case Kind.count:
          if (t !== Type.num && t !== Type.absent) return false;
          break;
      }
    }
    return true;
  }

  private write(b: Buffer, ingestSeq: number, index: number): void {
    const out = this.body;
    for (let c = 0; c < column.properties; c++) {
      const t = this.type[c]!;
      if (t === Type.str) {
        // `env` is written unescaped by `eventLine`: it is one of a few names, which need no escaping.
        out.escaped(b, this.at[c]!, this.length[c]!);
      } else if (t === Type.num) out.ascii(kinds[c] === Kind.count ? String(this.num[c]) : tsvMs(this.num[c]!));
      else if (t === Type.nil || kinds[c] === Kind.count) out.ascii('\\N');
      out.byte(0x09);
    }
    if (this.propsAt === absent) out.ascii('{}');
    else out.push(tsvString(JSON.stringify(valueAt(b, this.propsAt, this.propsEnd))));
    out.ascii(`\t${ingestSeq}\t${index}\n`);
  }
}

/** msgpackr's encoding of `undefined`: fixext 1 of type 0. */
const isUndefined = (b: Buffer, at: number): boolean => b[at] === 0xd4 && b[at + 1] === 0 && b[at + 2] === 0;
