import { Packr } from 'msgpackr';

// The event stream's wire format (docs/wire-format.md). Plain MessagePack (no msgpackr records) so that any
// MessagePack library can read it: a map {v: 1, events: [event, ...]}, one message per shard per publish.

export const wireVersion = 1;

/** Fields a client may send that travel unchanged to the stream. */
export interface PassedFields {
  anonymous_id?: string;
  user_id?: string;
  session_id?: string;
  content_id?: string;
  content_type?: string;
  content_title?: string;
  position_sec?: number;
  bitrate_kbps?: number;
  context?: Record<string, string>;
  properties?: Record<string, unknown>;
}

export const passedFields = [
  'anonymous_id',
  'user_id',
  'session_id',
  'content_id',
  'content_type',
  'content_title',
  'position_sec',
  'bitrate_kbps',
  'context',
  'properties',
] as const satisfies ReadonlyArray<keyof PassedFields>;

/** An accepted, enriched event as aggregators receive it. Times are Unix milliseconds. */
export interface WireEvent extends PassedFields {
  tenant: string;
  env: 'production' | 'staging' | 'development';
  event_type: string;
  ts: number;
  /** The timestamp the client sent, before skew correction; null when it sent none or `server_ts=1`. */
  client_ts: number | null;
  received_at: number;
  /** Lower-cased UUID: the de-duplication key. */
  event_id?: string;
  /** ISO 3166-1 alpha-2, or '' when unknown. */
  country: string;
  /** State or province name (for India the state, e.g. "Maharashtra"), or '' when unknown. */
  region: string;
  device: string;
}

export interface WireMessage {
  v: number;
  events: WireEvent[];
}

/**
 * An input message an aggregator passed on: its sequence in the event stream and the indexes of the events it
 * dropped as duplicates. The flusher reads its events from the event stream.
 */
export type PassedInput = [seq: number, dropped: number[]];

/** An aggregator's output message (raw stream): the input it passed on and snapshot rows per table. */
export interface OutputMessage {
  v: typeof outputVersion;
  inputs: PassedInput[];
  rows?: Record<string, unknown[][]>;
}

const packr = new Packr({ useRecords: false, moreTypes: false });

export function encodeEvent(event: WireEvent): Buffer {
  return packr.pack(event);
}

const head = Buffer.from([0x82, 0xa1, 0x76, wireVersion, 0xa6, ...Buffer.from('events')]);

/** A MessagePack array (`fix` 0x90, 0xdc, 0xdd) or map (0x80, 0xde, 0xdf) header for `n` entries. */
function header(n: number, [fix, x16, x32]: readonly [number, number, number]): Buffer {
  if (n < 16) return Buffer.from([fix | n]);
  if (n < 0x10000) return Buffer.from([x16, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = x32;
  b.writeUInt32BE(n, 1);
  return b;
}

const arrayHeader = (n: number): Buffer => header(n, [0x90, 0xdc, 0xdd]);
const mapHeader = (n: number): Buffer => header(n, [0x80, 0xde, 0xdf]);

/** Frame already-encoded events as one message without re-encoding them. */
export function frameMessage(encoded: readonly Buffer[], bytes: number): Buffer {
  const h = arrayHeader(encoded.length);
  return Buffer.concat([head, h, ...encoded], head.length + h.length + bytes);
}

export const frameOverhead = head.length + 5;

export function decodeMessage(data: Uint8Array): WireMessage {
  return packr.unpack(data) as WireMessage;
}

/** FNV-1a over (tenant, partition key): stable across processes and languages. */
export function shardOf(tenant: string, key: string, shards: number): number {
  let h = 0x811c9dc5;
  const s = `${tenant}\u0000${key}`;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/**
 * Events of one session land on one shard (the session state machine needs them together); events without a
 * session are keyed by the user (subscription state), then the anonymous id, then the content.
 */
export function partitionKey(e: Pick<WireEvent, 'session_id' | 'user_id' | 'anonymous_id' | 'content_id'>): string {
  return (
    e.session_id ??
    (e.user_id !== undefined
      ? `u:${e.user_id}`
      : e.anonymous_id !== undefined
        ? `a:${e.anonymous_id}`
        : `c:${e.content_id ?? ''}`)
  );
}

/** Each event an output message passes on, with its place in the event stream, in input order; `input(seq)` gives the event stream's message (bus/passed-events.ts reads them). */
export function forEachPassed(
  out: OutputMessage,
  input: (seq: number) => WireMessage,
  fn: (e: WireEvent, seq: number, index: number) => void,
): void {
  for (const [seq, dropped] of out.inputs) {
    const skip = new Set(dropped);
    input(seq).events.forEach((e, i) => {
      if (!skip.has(i)) fn(e, seq, i);
    });
  }
}

/** The input sequences an output message names. */
export const inputsToRead = (out: OutputMessage): number[] => out.inputs.map(([seq]) => seq);

/** Header on every raw-stream message: the last ingest sequence whose events it completes. */
export const inputSeqHeader = 'Darshak-Input-Seq';

export const outputVersion = 4;

/** A table's snapshot rows (each its cells in the table's column order), encoded for `frameOutput`. */
export function encodeRows(table: string, rows: ReadonlyArray<readonly unknown[]>): EncodedTableRows {
  return [table, rows.length, Buffer.concat(rows.map((r) => packr.pack(r)))];
}

/** Some rows of a table, encoded one after another: the table, how many, their bytes. */
export type EncodedTableRows = readonly [table: string, count: number, bytes: Uint8Array];

/** A `PassedInput` encoded. */
export const frameInput = (seq: number, dropped: readonly number[]): Buffer => packr.pack([seq, dropped]);

/** Frame passed inputs (each from `frameInput`) and encoded rows (by table) as one output message: {v: 4, inputs, rows}. */
export function frameOutput(inputs: readonly Buffer[], rows: readonly EncodedTableRows[]): Buffer {
  const parts: Uint8Array[] = [
    Buffer.from([0x83]),
    packr.pack('v'),
    packr.pack(outputVersion),
    packr.pack('inputs'),
    arrayHeader(inputs.length),
  ];
  parts.push(...inputs);
  parts.push(packr.pack('rows'), mapHeader(rows.length));
  for (const [table, count, bytes] of rows) parts.push(packr.pack(table), arrayHeader(count), bytes);
  return Buffer.concat(parts);
}

/** Bytes `frameOutput` adds around its inputs and rows, at most, less each table's `tableFraming`. */
export const outputOverhead = 64;

/** Bytes `frameOutput` adds for one table's rows, at most: its name and their array header. */
export const tableFraming = (table: string): number => Buffer.byteLength(table) + 16;

/** An output message; one of another version (an earlier build's: docs/compatibility.md) is an error. */
export function decodeOutput(data: Uint8Array): OutputMessage {
  const out = packr.unpack(data) as { v?: unknown };
  if (out.v !== outputVersion)
    throw new Error(
      `a raw-stream message of version ${String(out.v)}: this build reads version ${outputVersion} only (docs/compatibility.md)`,
    );
  return out as OutputMessage;
}

/**
 * One aggregator batch's detector signals (docs/alerts.md): {v: 1, shard, from, up_to, clock, signals}. `clock` is
 * the latest arrival time the shard had applied, so a regenerated batch carries the same one.
 */
export interface SignalMessage {
  v: 1;
  shard: number;
  from: number;
  up_to: number;
  clock: number;
  signals: Array<[name: string, key: string[], at: number, fields: Record<string, number>]>;
}

export function encodeSignals(m: SignalMessage): Buffer {
  return packr.pack(m);
}

export function decodeSignals(data: Uint8Array): SignalMessage {
  return packr.unpack(data) as SignalMessage;
}
