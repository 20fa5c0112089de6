import { Unpackr } from 'msgpackr';

// Reading MessagePack in place (the event stream's messages, docs/wire-format.md): positions in a buffer, values
// into module slots, no object per value. For the readers of every event: the aggregators' (event-reader.ts) and
// the flusher's events-table lines (store/event-lines.ts).

const unpackr = new Unpackr({ useRecords: false, moreTypes: false });

/** Byte ranges are kept as numbers; -1 means the field was not in the event. */
export const absent = -1;

/** Where a string's bytes are, set by `readStr` (one pair of module slots: no object per string). */
export let strStart = 0;
export let strLength = 0;
/** The value `readNum` read. */
export let num = 0;

export function text(b: Buffer, start: number, length: number): string {
  const end = start + length;
  for (let i = start; i < end; i++) if (b[i]! >= 0x80) return b.toString('utf8', start, end);
  return b.toString('latin1', start, end);
}

/** A map's or array's entry count at `p` (fixmap/map16/map32 or fixarray/array16/array32), or -1. */
export function countAt(b: Buffer, p: number): number {
  const t = b[p]!;
  if ((t & 0xf0) === 0x80 || (t & 0xf0) === 0x90) return t & 0x0f;
  if (t === 0xde || t === 0xdc) return (b[p + 1]! << 8) | b[p + 2]!;
  if (t === 0xdf || t === 0xdd) return b.readUInt32BE(p + 1);
  return -1;
}

export const isMap = (b: Buffer, p: number): boolean => (b[p]! & 0xf0) === 0x80 || b[p] === 0xde || b[p] === 0xdf;
export const isArray = (b: Buffer, p: number): boolean => (b[p]! & 0xf0) === 0x90 || b[p] === 0xdc || b[p] === 0xdd;

export function afterCountHeader(b: Buffer, p: number): number {
  const t = b[p]!;
  return t === 0xde || t === 0xdc ? p + 3 : t === 0xdf || t === 0xdd ? p + 5 : p + 1;
}

/** The position after the value at `p`. */
export function skipValue(b: Buffer, p: number): number {
  const t = b[p]!;
  if (t < 0x80 || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) return p + 1;
  if ((t & 0xe0) === 0xa0) return p + 1 + (t & 0x1f);
  if ((t & 0xe0) === 0x80) {
    // fixmap (0x80-0x8f) holds twice its count in values, fixarray (0x90-0x9f) its count
    let n = (t & 0x0f) * (t < 0x90 ? 2 : 1);
    let q = p + 1;
    while (n-- > 0) q = skipValue(b, q);
    return q;
  }
  switch (t) {
    case 0xcc:
    case 0xd0:
    case 0xd4:
      return p + 2 + (t === 0xd4 ? 1 : 0);
    case 0xcd:
    case 0xd1:
      return p + 3;
    case 0xd5:
      return p + 4;
    case 0xce:
    case 0xd2:
    case 0xca:
      return p + 5;
    case 0xd6:
      return p + 6;
    case 0xcf:
    case 0xd3:
    case 0xcb:
      return p + 9;
    case 0xd7:
      return p + 10;
    case 0xd8:
      return p + 18;
    case 0xd9:
    case 0xc4:
      return p + 2 + b[p + 1]!;
    case 0xc7:
      return p + 3 + b[p + 1]!;
    case 0xda:
    case 0xc5:
      return p + 3 + ((b[p + 1]! << 8) | b[p + 2]!);
    case 0xc8:
      return p + 4 + ((b[p + 1]! << 8) | b[p + 2]!);
    case 0xdb:
    case 0xc6:
      return p + 5 + b.readUInt32BE(p + 1);
    case 0xc9:
      return p + 6 + b.readUInt32BE(p + 1);
    case 0xdc:
    case 0xdd:
    case 0xde:
    case 0xdf: {
      let n = countAt(b, p) * (t >= 0xde ? 2 : 1);
      let q = afterCountHeader(b, p);
      while (n-- > 0) q = skipValue(b, q);
      return q;
    }
  }
  throw new Error(`event stream message: unknown MessagePack type 0x${t.toString(16)} at ${p}`);
}

/** A string at `p` sets strStart and strLength and answers the position after it; anything else answers -1. */
export function readStr(b: Buffer, p: number): number {
  const t = b[p]!;
  if ((t & 0xe0) === 0xa0) {
    strStart = p + 1;
    strLength = t & 0x1f;
  } else if (t === 0xd9) {
    strStart = p + 2;
    strLength = b[p + 1]!;
  } else if (t === 0xda) {
    strStart = p + 3;
    strLength = (b[p + 1]! << 8) | b[p + 2]!;
  } else if (t === 0xdb) {
    strStart = p + 5;
    strLength = b.readUInt32BE(p + 1);
  } else return -1;
  return strStart + strLength;
}

/** A number at `p` sets `num` and answers the position after it; anything else answers -1. */
export function readNum(b: Buffer, p: number): number {
  const t = b[p]!;
  if (t < 0x80) {
    num = t;
    return p + 1;
  }
  if (t >= 0xe0) {
    num = t - 0x100;
    return p + 1;
  }
  switch (t) {
    case 0xcb:
      num = b.readDoubleBE(p + 1);
      return p + 9;
    case 0xca:
      num = b.readFloatBE(p + 1);
      return p + 5;
    case 0xcc:
      num = b[p + 1]!;
      return p + 2;
    case 0xcd:
      num = b.readUInt16BE(p + 1);
      return p + 3;
    case 0xce:
      num = b.readUInt32BE(p + 1);
      return p + 5;
    case 0xcf:
      num = Number(b.readBigUInt64BE(p + 1));
      return p + 9;
    case 0xd0:
      num = b.readInt8(p + 1);
      return p + 2;
    case 0xd1:
      num = b.readInt16BE(p + 1);
      return p + 3;
    case 0xd2:
      num = b.readInt32BE(p + 1);
      return p + 5;
    case 0xd3:
      num = Number(b.readBigInt64BE(p + 1));
      return p + 9;
  }
  return -1;
}

/** Any value, as msgpackr reads it (the rare path: a field of an unexpected type, a nested object). */
export function valueAt(b: Buffer, start: number, end: number): unknown {
  return unpackr.unpack(b.subarray(start, end));
}

/**
 * A lookup of map keys by their bytes, for names of one byte each (latin1): by length, then first byte, so a key is
 * compared in full only with the one name it could be. Answers the name's value, or `other`.
 */
export function keyMatcher<K extends number>(
  names: ReadonlyArray<readonly [name: string, key: K]>,
  other: K,
): (b: Buffer, start: number, length: number) => K {
  const table: Array<Map<number, Array<[Uint8Array, K]>>> = [];
  for (const [name, key] of names) {
    const bytes = Buffer.from(name, 'latin1');
    const byFirst = (table[bytes.length] ??= new Map());
    let list = byFirst.get(bytes[0]!);
    if (!list) byFirst.set(bytes[0]!, (list = []));
    list.push([bytes, key]);
  }
  return (b, start, length) => {
    const candidates = table[length]?.get(b[start]!);
    if (!candidates) return other;
    for (const [name, key] of candidates) {
      let i = 1;
      while (i < length && name[i] === b[start + i]) i++;
      if (i === length) return key;
    }
    return other;
  };
}

/**
 * An event stream message's (docs/wire-format.md) bytes, its version `v`, and where its events are: the position of
 * the first and how many follow one another there. Of several `events` keys the last counts, as msgpackr reads it.
 */
export function messageEvents(data: Uint8Array): { b: Buffer; v: number; at: number; count: number } {
  const b = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (!isMap(b, 0)) throw new Error('event stream message: not a map');
  const n = countAt(b, 0);
  let p = afterCountHeader(b, 0);
  let v = 0;
  let at = 0;
  let count = 0;
  for (let k = 0; k < n; k++) {
    const after = readStr(b, p);
    const isEvents = after >= 0 && strLength === 6 && b.toString('latin1', strStart, strStart + 6) === 'events';
    const isV = after >= 0 && strLength === 1 && b[strStart] === 0x76;
    p = after >= 0 ? after : skipValue(b, p);
    if (isV && readNum(b, p) >= 0) v = num;
    if (isEvents) {
      if (!isArray(b, p)) throw new Error('event stream message: events is not an array');
      count = countAt(b, p);
      at = afterCountHeader(b, p);
    }
    p = skipValue(b, p);
  }
  return { b, v, at, count };
}
