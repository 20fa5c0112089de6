// A MessagePack writer for snapshot rows (docs/wire-format.md): arrays of strings, numbers, nulls and arrays of
// numbers, written straight into one growing buffer. An aggregator drains its output through it, where building an
// array per row and packing each one on its own made a few allocations and a buffer per row, and a row per event is
// what a shard hands on. Any MessagePack reader reads it; msgpackr reads back the same values
// (test/unit/msgpack-writer.test.ts).

export class MsgpackWriter {
  private buf = Buffer.allocUnsafe(64 * 1024);
  private at = 0;

  /** Bytes written so far. */
  get length(): number {
    return this.at;
  }

  /** The bytes written: a copy, so the writer can be used again. */
  take(): Buffer {
    const out = Buffer.from(this.buf.subarray(0, this.at));
    this.at = 0;
    return out;
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }

  array(n: number): void {
    this.room(5);
    const b = this.buf;
    if (n < 16) b[this.at++] = 0x90 | n;
    else if (n < 0x10000) {
      b[this.at] = 0xdc;
      b.writeUInt16BE(n, this.at + 1);
      this.at += 3;
    } else {
      b[this.at] = 0xdd;
      b.writeUInt32BE(n, this.at + 1);
      this.at += 5;
    }
  }

  nil(): void {
    this.room(1);
    this.buf[this.at++] = 0xc0;
  }

  number(v: number): void {
    this.room(9);
    const b = this.buf;
    // Integers in 32 bits take their smallest form; any other number (fractions, milliseconds since 1970) a float64,
    // which holds every safe integer exactly.
    if (Number.isInteger(v) && v >= -0x80000000 && v <= 0xffffffff && !Object.is(v, -0)) {
      if (v >= 0) {
        if (v < 0x80) b[this.at++] = v;
        else if (v < 0x100) {
          b[this.at++] = 0xcc;
          b[this.at++] = v;
        } else if (v < 0x10000) {
          b[this.at] = 0xcd;
          b.writeUInt16BE(v, this.at + 1);
          this.at += 3;
        } else {
          b[this.at] = 0xce;
          b.writeUInt32BE(v, this.at + 1);
          this.at += 5;
        }
      } else if (v >= -32) b[this.at++] = 0x100 + v;
      else if (v >= -0x8000) {
        b[this.at] = 0xd1;
        b.writeInt16BE(v, this.at + 1);
        this.at += 3;
      } else {
        b[this.at] = 0xd2;
        b.writeInt32BE(v, this.at + 1);
        this.at += 5;
      }
      return;
    }
    b[this.at] = 0xcb;
    b.writeDoubleBE(v, this.at + 1);
    this.at += 9;
  }

  string(s: string): void {
    // At most 3 bytes per UTF-16 unit, and a 5-byte header.
    this.room(5 + 3 * s.length);
    const b = this.buf;
    if (s.length < 32) {
      // Most strings are short ASCII (tenants, regions, ids): copied a character a byte, which costs less than a call
      // into Buffer.write. Any other character hands the string to it.
      let i = 0;
      for (; i < s.length; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[this.at + 1 + i] = c;
      }
      if (i === s.length) {
        b[this.at] = 0xa0 | i;
        this.at += 1 + i;
        return;
      }
      // Written after a one-byte header, moved along if it turns out 32 bytes or longer.
      const n = b.write(s, this.at + 1, 'utf8');
      if (n < 32) {
        b[this.at] = 0xa0 | n;
        this.at += 1 + n;
        return;
      }
      b.copyWithin(this.at + 2, this.at + 1, this.at + 1 + n);
      b[this.at] = 0xd9;
      b[this.at + 1] = n;
      this.at += 2 + n;
      return;
    }
    const n = b.write(s, this.at + 5, 'utf8');
    b[this.at] = 0xdb;
    b.writeUInt32BE(n, this.at + 1);
    this.at += 5 + n;
  }

  /** A cell of a snapshot row: string, number, null, or an array of numbers. */
  cell(c: string | number | null | readonly number[]): void {
    if (typeof c === 'number') this.number(c);
    else if (typeof c === 'string') this.string(c);
    else if (c === null) this.nil();
    else {
      this.array(c.length);
      for (const v of c) this.number(v);
    }
  }
}
