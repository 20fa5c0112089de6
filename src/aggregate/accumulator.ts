import { MsgpackWriter } from '../bus/msgpack-writer.js';
import type { Cell, Emitter, Fields, SignalRow, TableSpec } from '../metric/pipeline.js';

// Where the runtime holds pipeline output between flushes (`Emitter`), and what a flush hands on.

/** The rows of one flush, per table name, in the table's column order. */
export type Rows = Map<string, Cell[][]>;

/** What one flush hands on: snapshot rows for ClickHouse and detector signals for the alerts role. */
export interface Output {
  rows: Rows;
  signals: SignalRow[];
}

/** The same, its rows as MessagePack. */
export interface EncodedOutput {
  rows: EncodedRows;
  signals: SignalRow[];
}

/** A flush's rows as MessagePack (what a shard publishes): one buffer, each table's rows one after another. */
export class EncodedRows {
  readonly tables: Array<{ name: string; first: number; count: number }> = [];
  /** Where each row starts in `bytes`; a row ends where the next starts, the last at the end. */
  private readonly starts: number[] = [];
  bytes: Buffer = Buffer.alloc(0);

  /** `writer` is the accumulator's, used again for each flush: its buffer keeps the size a flush needs. */
  constructor(private readonly writer: MsgpackWriter) {}

  get count(): number {
    return this.starts.length;
  }

  row(table: TableSpec, cells: number): void {
    const last = this.tables[this.tables.length - 1];
    if (last?.name === table.name) last.count++;
    else this.tables.push({ name: table.name, first: this.starts.length, count: 1 });
    this.starts.push(this.writer.length);
    this.writer.array(cells);
  }

  cell(c: Cell): void {
    this.writer.cell(c);
  }

  finish(): void {
    this.bytes = this.writer.take();
  }

  /** The bytes of `count` rows from row `first` on. */
  slice(first: number, count: number): Buffer {
    return this.bytes.subarray(this.starts[first], this.end(first + count - 1));
  }

  size(i: number): number {
    return this.end(i) - this.starts[i]!;
  }

  private end(i: number): number {
    return i + 1 < this.starts.length ? this.starts[i + 1]! : this.bytes.length;
  }
}

/** A flush's rows as arrays of cells, per table name (replay and tests read them). */
class ArrayRows {
  readonly rows: Rows = new Map();
  private current: Cell[] = [];

  row(table: TableSpec, _cells: number): void {
    let list = this.rows.get(table.name);
    if (!list) this.rows.set(table.name, (list = []));
    list.push((this.current = []));
  }

  cell(c: Cell): void {
    this.current.push(c);
  }
}

/** Where a drain writes its rows, a row at a time: how many cells, then each of them. */
type RowWriter = Pick<ArrayRows, 'row' | 'cell'>;

/** A row kept from one flush to the next: the flush it was last touched in. */
interface Kept {
  key: readonly Cell[];
  flush: number;
}

interface SumRow extends Kept {
  values: number[];
}

interface SignalAcc extends Kept {
  row: SignalRow;
}

/**
 * Rows by key as nested maps, one level per key cell: finding a row builds no key string (joining the cells cost a
 * string, and its hash, per contribution). Rows are kept from one flush to the next, their values zeroed as they are
 * drained, and a row no contribution touched for a whole flush is removed: the maps hold the keys of about two
 * flushes, and a key that keeps being touched (a minute, a region) allocates nothing.
 *
 * A flush hands on the rows it touched in the order it first touched them, which depends on its own contributions
 * alone: a batch regenerated after a crash, from an accumulator rebuilt without the rows of earlier flushes, comes
 * out in the same order and so cut into the same parts.
 */
class KeptRows<V extends Kept> {
  private readonly root = new Map<Cell, unknown>();
  private touched: V[] = [];
  private previous: V[] = [];

  constructor(
    /** Key cells a row is found by. */
    private readonly depth: number,
  ) {}

  /** The map holding the row of `key` (its first `depth` cells) under its last cell; maps on the way are made. */
  leaf(key: readonly Cell[]): Map<Cell, V> {
    let m = this.root;
    for (let i = 0; i < this.depth - 1; i++) {
      let next = m.get(key[i]!) as Map<Cell, unknown> | undefined;
      if (!next) m.set(key[i]!, (next = new Map()));
      m = next;
    }
    return m as Map<Cell, V>;
  }

  /** Mark a row touched in `flush` (the first time in it: listed for the drain). */
  touch(row: V, flush: number): V {
    if (row.flush !== flush) {
      row.flush = flush;
      this.touched.push(row);
    }
    return row;
  }

  /** The rows `flush` touched, in the order it first touched them; rows the flush before touched and this one not are removed. */
  drain(flush: number): V[] {
    for (const row of this.previous) if (row.flush !== flush) this.remove(row.key);
    const out = this.touched;
    this.previous = out;
    this.touched = [];
    return out;
  }

  private remove(key: readonly Cell[]): void {
    const path: Array<Map<Cell, unknown>> = [this.root];
    for (let i = 0; i < this.depth - 1; i++) path.push(path[i]!.get(key[i]!) as Map<Cell, unknown>);
    // Prune the maps the row leaves empty, so that keys of the past (minutes) do not pile up.
    for (let i = this.depth - 1; i >= 0; i--) {
      path[i]!.delete(key[i]!);
      if (path[i]!.size > 0) break;
    }
  }
}

/**
 * Tables in the order of their names. Kept rows outlive a flush, so the order tables were first touched in would be
 * that of an earlier flush, which a rebuilt accumulator never saw: output must not depend on it.
 */
const byName = <V>(tables: Map<TableSpec, V>): Array<[TableSpec, V]> =>
  [...tables].sort(([a], [b]) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

/** Holds pipeline output between drains: `sum` rows and signals merged per key, other rows as they came. */
export class Accumulator implements Emitter {
  /** The flush being accumulated: rows touched in it carry this number. */
  private flush = 1;
  private readonly sums = new Map<TableSpec, KeptRows<SumRow>>();
  /**
   * Per `map` table, its contributions as they came, unmerged: each one's key cells then values, one after another in
   * one array. ClickHouse sums a key's rows (the map by its keys, dropping zero entries), and a key mostly gets one
   * contribution a flush (a viewer's session starting, or reaching a new hour): merging them here cost a kept row, the
   * maps finding it and its removal, for rows that were not fewer.
   */
  private readonly mapCells = new Map<TableSpec, { stride: number; cells: Cell[] }>();
  /** Per table and tenant: +sign at a range's first second, -sign after its last (expanded at drain). */
  private readonly seconds = new Map<TableSpec, Map<string, Map<number, number>>>();
  /**
   * Per `replace` table, its rows in the order put, each key as often as it was put, and each row's version (0: the
   * drain's). Finding each key's row to keep only its last cost more than the rows it saved: a key is mostly put once
   * a flush (a session's hour, by the session snapshot). A key put twice in a flush (a session evicted, then recalled
   * by a late event) is put at two versions (`putVersion`): its rows may reach ClickHouse in separate messages, written
   * in either order, and the higher version wins whatever the order.
   */
  private readonly puts = new Map<TableSpec, { rows: Array<readonly Cell[]>; versions: number[] }>();
  /** The version of rows put from now on; 0, the default, gives them the version of the drain that takes them. */
  putVersion = 0;
  private readonly appends = new Map<TableSpec, Array<readonly Cell[]>>();
  /** Per signal name and key length, then by key and bucket. */
  private readonly signals = new Map<string, Map<number, KeptRows<SignalAcc>>>();
  private readonly writer = new MsgpackWriter();
  /** The key and bucket of a signal, as one array (reused: a row keeps its own). */
  private readonly signalKey: Cell[] = [];

  signal(name: string, key: readonly string[], at: number, fields: Fields): void {
    let byLength = this.signals.get(name);
    if (!byLength) this.signals.set(name, (byLength = new Map<number, KeptRows<SignalAcc>>()));
    let rows = byLength.get(key.length);
    if (!rows) byLength.set(key.length, (rows = new KeptRows(key.length + 1)));
    const k = this.signalKey;
    k.length = 0;
    for (const cell of key) k.push(cell);
    k.push(at);
    const leaf = rows.leaf(k);
    let acc = leaf.get(at);
    if (!acc) leaf.set(at, (acc = { key: k.slice(), flush: 0, row: { name, key: key.slice(), at, fields: {} } }));
    const f = rows.touch(acc, this.flush).row.fields;
    for (const name in fields) f[name] = (f[name] ?? 0) + fields[name]!;
  }

  add(table: TableSpec, key: readonly Cell[], values: readonly number[]): void {
    if (table.map) return this.addToMap(table, key, values);
    let rows = this.sums.get(table);
    if (!rows) this.sums.set(table, (rows = new KeptRows(key.length)));
    const leaf = rows.leaf(key);
    const last = key[key.length - 1]!;
    let row = leaf.get(last);
    if (!row) leaf.set(last, (row = { key: key.slice(), flush: 0, values: new Array<number>(values.length).fill(0) }));
    rows.touch(row, this.flush);
    for (let i = 0; i < values.length; i++) row.values[i]! += values[i]!;
  }

  private addToMap(table: TableSpec, key: readonly Cell[], values: readonly number[]): void {
    let rows = this.mapCells.get(table);
    if (!rows) this.mapCells.set(table, (rows = { stride: key.length + values.length, cells: [] }));
    const { cells } = rows;
    for (let i = 0; i < key.length; i++) cells.push(key[i]!);
    for (let i = 0; i < values.length; i++) cells.push(values[i]!);
  }

  addSeconds(table: TableSpec, tenant: string, fromSec: number, toSec: number, sign: number): void {
    let byTenant = this.seconds.get(table);
    if (!byTenant) this.seconds.set(table, (byTenant = new Map<string, Map<number, number>>()));
    let points = byTenant.get(tenant);
    if (!points) byTenant.set(tenant, (points = new Map<number, number>()));
    points.set(fromSec, (points.get(fromSec) ?? 0) + sign);
    points.set(toSec, (points.get(toSec) ?? 0) - sign);
  }

  put(table: TableSpec, row: readonly Cell[]): void {
    let put = this.puts.get(table);
    if (!put) this.puts.set(table, (put = { rows: [], versions: [] }));
    put.rows.push(row);
    put.versions.push(this.putVersion);
  }

  append(table: TableSpec, row: readonly Cell[]): void {
    let rows = this.appends.get(table);
    if (!rows) this.appends.set(table, (rows = []));
    rows.push(row);
  }

  /** The rows merged since the last drain, as arrays of cells; `version` orders this flush's `replace` rows. */
  drain(version: number): Output {
    const w = new ArrayRows();
    return { rows: w.rows, signals: this.drainInto(version, w) };
  }

  /** The same rows, as the MessagePack a shard publishes. */
  drainEncoded(version: number): EncodedOutput {
    const rows = new EncodedRows(this.writer);
    const signals = this.drainInto(version, rows);
    rows.finish();
    return { rows, signals };
  }

  private drainInto(version: number, w: RowWriter): SignalRow[] {
    const flush = this.flush++;
    for (const [table, rows] of byName(this.sums)) {
      for (const row of rows.drain(flush)) {
        const { key, values } = row;
        if (values.some((v) => v !== 0)) {
          w.row(table, key.length + values.length);
          for (const c of key) w.cell(c);
          for (const v of values) w.cell(v);
        }
        values.fill(0);
      }
    }
    // A contribution is a row whose map holds its one key (the last key cell) and values; none for all-zero values.
    for (const [table, { stride, cells }] of this.mapCells) {
      const width = table.values.length;
      const keyCells = stride - width - 1;
      for (let at = 0; at < cells.length; at += stride) {
        let zero = true;
        for (let j = 0; j < width; j++) if (cells[at + keyCells + 1 + j] !== 0) zero = false;
        if (zero) continue;
        w.row(table, keyCells + 1 + width);
        for (let i = 0; i < keyCells; i++) w.cell(cells[at + i]!);
        w.cell([Number(cells[at + keyCells])]);
        for (let j = 0; j < width; j++) w.cell([cells[at + keyCells + 1 + j] as number]);
      }
    }
    this.mapCells.clear();
    for (const [table, byTenant] of this.seconds) {
      for (const [tenant, points] of byTenant) {
        const sorted = [...points].filter(([, d]) => d !== 0).sort((a, b) => a[0] - b[0]);
        let level = 0;
        for (let i = 0; i < sorted.length - 1; i++) {
          level += sorted[i]![1];
          if (level === 0) continue;
          for (let s = sorted[i]![0]; s < sorted[i + 1]![0]; s++) {
            w.row(table, 3);
            w.cell(tenant);
            w.cell(s);
            w.cell(level);
          }
        }
      }
    }
    this.seconds.clear();
    for (const [table, { rows, versions }] of this.puts) {
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!;
        w.row(table, row.length + 1);
        for (const c of row) w.cell(c);
        w.cell(versions[i] || version);
      }
    }
    this.puts.clear();
    for (const [table, rows] of this.appends) {
      for (const row of rows) {
        w.row(table, row.length);
        for (const c of row) w.cell(c);
      }
    }
    this.appends.clear();
    const signals: SignalRow[] = [];
    for (const [, byLength] of [...this.signals].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      for (const [, rows] of [...byLength].sort(([a], [b]) => a - b)) {
        for (const acc of rows.drain(flush)) {
          const { row } = acc;
          if (Object.values(row.fields).some((v) => v !== 0)) signals.push(row);
          // A new object for the next flush: this one is handed on, and fields are listed in the order touched.
          acc.row = { name: row.name, key: row.key, at: row.at, fields: {} };
        }
      }
    }
    return signals;
  }

  /** Forget everything not yet drained. */
  clear(): void {
    this.sums.clear();
    this.mapCells.clear();
    this.seconds.clear();
    this.puts.clear();
    this.appends.clear();
    this.signals.clear();
  }
}
