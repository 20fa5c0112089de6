import { Readable } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';
import type { Cell } from '../metric/pipeline.js';

// Rows go to ClickHouse as TabSeparated text. The embedded engine takes it as bytes (chdb's raw insert); through
// `@clickhouse/client` it went as JSON inside the statement's text, which the engine then parsed as SQL as well
// (commit 8bf1af3's message has the same-run figures).

/** chdb's raw insert, as `chdb/connection` exposes it. */
export interface RawInserter {
  rawInsert(params: {
    table: string;
    values: Buffer;
    format: 'TSV';
    columns: readonly string[];
    settings: Record<string, string>;
  }): Promise<unknown>;
}

/** The embedded engine's raw insert behind each client Store.open made over it. */
const embedded = new WeakMap<ClickHouseClient, RawInserter>();

export function registerEmbedded(client: ClickHouseClient, raw: RawInserter): void {
  embedded.set(client, raw);
}

/** Whether the client is over the embedded engine, which shares this process's file system. */
export function isEmbedded(client: ClickHouseClient): boolean {
  return embedded.has(client);
}

const special = /[\\\t\n\r\0]/;
const specials = /[\\\t\n\r\0]/g;
const escapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };
const escapeChar = (c: string): string => escapes[c]!;
/** The same escapes by byte: the byte after the backslash for each byte escaped (all are ASCII), 0 for the others. */
const escapeByte = new Uint8Array(0x80);
for (const [c, e] of Object.entries(escapes)) escapeByte[c.charCodeAt(0)] = e.charCodeAt(1);

/** Whether UTF-8 bytes hold one that `tsvString` escapes. */
export function needsEscape(b: Uint8Array, start: number, length: number): boolean {
  for (let i = start; i < start + length; i++) if (b[i]! < 0x80 && escapeByte[b[i]!] !== 0) return true;
  return false;
}

/** A string as a TabSeparated field. */
export function tsvString(s: string): string {
  return special.test(s) ? s.replace(specials, escapeChar) : s;
}

/** Unix milliseconds as a DateTime64(3) field (seconds with three decimals). */
export function tsvMs(ms: number): string {
  const whole = Math.round(ms);
  const s = Math.floor(whole / 1000);
  const frac = whole - s * 1000;
  return `${s}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}`;
}

/** A cell as a field: `ms`, when its column is a DateTime64(3) given in Unix milliseconds. */
export function tsvCell(v: Cell, ms: boolean): string {
  if (v === null) return '\\N';
  if (typeof v === 'string') return tsvString(v);
  if (typeof v === 'number') return ms ? tsvMs(v) : String(v);
  return `[${v.join(',')}]`;
}

/**
 * TabSeparated lines gathered into one buffer as they come: many lines joined into one string make a rope that
 * costs several times more to flatten than the lines cost to build.
 */
export class TsvLines {
  private buf = Buffer.allocUnsafe(1 << 16);
  private used = 0;

  /** These lines, each already a whole line. */
  static of(lines: Iterable<string>): TsvLines {
    const body = new TsvLines();
    for (const line of lines) body.push(line);
    return body;
  }

  push(line: string): void {
    // UTF-8 takes at most three bytes per UTF-16 unit.
    this.room(line.length * 3);
    this.used += this.buf.write(line, this.used);
  }

  /** A string of ASCII characters that need no escaping (a number, `\N`), byte by byte: no call into C++. */
  ascii(s: string): void {
    this.room(s.length);
    for (let i = 0; i < s.length; i++) this.buf[this.used++] = s.charCodeAt(i);
  }

  /** One byte (a tab, a newline). */
  byte(c: number): void {
    this.room(1);
    this.buf[this.used++] = c;
  }

  /** UTF-8 bytes as a field, escaped as `tsvString` escapes their string (what it escapes is ASCII). */
  escaped(b: Uint8Array, start: number, length: number): void {
    this.room(2 * length);
    const out = this.buf;
    let at = this.used;
    for (let i = start; i < start + length; i++) {
      const c = b[i]!;
      const e = c < 0x80 ? escapeByte[c]! : 0;
      if (e === 0) out[at++] = c;
      else {
        out[at++] = 0x5c;
        out[at++] = e;
      }
    }
    this.used = at;
  }

  get bytes(): Buffer {
    return this.buf.subarray(0, this.used);
  }

  private room(n: number): void {
    if (this.used + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.used + n));
    this.buf.copy(next, 0, 0, this.used);
    this.buf = next;
  }
}

/** A row of cells as a TabSeparated line; `ms[i]` marks the DateTime64(3) columns (absent: not one). */
export function tsvRow(row: readonly Cell[], ms: readonly boolean[]): string {
  let line = '';
  for (let i = 0; i < row.length; i++) line += (i === 0 ? '' : '\t') + tsvCell(row[i]!, ms[i] === true);
  return `${line}\n`;
}

/**
 * One idempotent insert of TabSeparated lines: the same `token` within the table's de-duplication window stores
 * nothing the second time.
 */
export async function insertTsv(
  client: ClickHouseClient,
  table: string,
  columns: readonly string[],
  lines: TsvLines,
  token: string,
): Promise<void> {
  const body = lines.bytes;
  if (body.length === 0) return;
  const raw = embedded.get(client);
  if (raw) {
    await raw.rawInsert({
      table,
      values: body,
      format: 'TSV',
      columns,
      settings: { insert_deduplication_token: token },
    });
    return;
  }
  await client.insert({
    table,
    values: Readable.from([body], { objectMode: false }),
    columns: columns as [string, ...string[]],
    format: 'TabSeparated',
    clickhouse_settings: { insert_deduplication_token: token },
  });
}
