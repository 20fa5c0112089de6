import type { ClickHouseClient } from '@clickhouse/client';

export const ranges = ['24h', '7d', '30d', 'qtd'] as const;
export type RangeName = (typeof ranges)[number];

/** A half-open time range [from, to) in Unix milliseconds, on whole minutes. */
export interface Range {
  from: number;
  to: number;
}

const day = 86_400_000;
const spans: Record<Exclude<RangeName, 'qtd'>, number> = { '24h': day, '7d': 7 * day, '30d': 30 * day };

/** docs/metrics.md "Ranges": up to the start of the minute after now; qtd from the start of the UTC quarter. */
export function resolveRange(range: RangeName, now: number): Range {
  const to = Math.floor(now / 60_000) * 60_000 + 60_000;
  if (range === 'qtd') {
    const d = new Date(now);
    return { from: Date.UTC(d.getUTCFullYear(), Math.floor(d.getUTCMonth() / 3) * 3, 1), to };
  }
  return { from: to - spans[range], to };
}

export const days = (n: number): number => n * day;

/**
 * Run a parameterised query (values travel as `{name:Type}` parameters, never in the SQL text); rows as JSONEachRow
 * would give them. Read as one JSONCompact document: the client parses JSONEachRow line by line, which cost 4 of the
 * 10 ms of a 3,000-row answer (bench/RESULTS.md "Eight runs on a 2 × Intel Xeon, and answers read as one document").
 */
export async function select<T>(
  client: ClickHouseClient,
  query: string,
  params: Record<string, string | number | readonly string[]>,
): Promise<T[]> {
  const result = await client.query({ query, query_params: params, format: 'JSONCompact' });
  const { meta, data } = await result.json<unknown[]>();
  const names = (meta ?? []).map((m) => m.name);
  return data.map((values) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) row[names[i]!] = values[i];
    return row as T;
  });
}

/** A query and its parameters, not yet run. */
export interface Query {
  query: string;
  params: Record<string, string | number | readonly string[]>;
}

/**
 * Several queries of one answer as one statement, each part's rows as that query alone would return them. Embedded
 * ClickHouse runs one statement at a time, even on several connections, while the branches of a UNION ALL run side by
 * side on its threads; one statement also pays the per-query cost once (docs/store.md "One statement per answer").
 * Each part's parameters are renamed apart (`{name:Type}` becomes `{p<i>_name:Type}`), so parts may share names.
 */
export async function selectParts<T extends Record<string, object>>(
  client: ClickHouseClient,
  parts: { [K in keyof T]: Query },
): Promise<{ [K in keyof T]: T[K][] }> {
  const names = Object.keys(parts) as Array<keyof T>;
  const params: Query['params'] = {};
  const branches = names.map((name, i) => {
    const part = parts[name];
    for (const [k, v] of Object.entries(part.params)) params[`p${i}_${k}`] = v;
    return `SELECT ${i} AS part, formatRowNoNewline('JSONEachRow', *) AS row FROM (${part.query.replace(/\{(\w+):/g, `{p${i}_$1:`)})`;
  });
  const rows = await select<{ part: number; row: string }>(client, branches.join('\nUNION ALL\n'), params);
  const out = Object.fromEntries(names.map((name) => [name, [] as object[]])) as { [K in keyof T]: T[K][] };
  for (const { part, row } of rows) out[names[part]!].push(JSON.parse(row) as T[keyof T]);
  return out;
}

/** Parameters for a tenant and a range: seconds for DateTime columns, milliseconds for DateTime64(3) ones. */
export function rangeParams(tenant: string, r: Range): Record<string, string | number> {
  return { tenant, from_s: r.from / 1000, to_s: r.to / 1000, from_ms: r.from, to_ms: r.to };
}

/** A DateTime64(3) value from a `{name:Int64}` parameter of Unix milliseconds. */
export const msParam = (p: string): string => `fromUnixTimestamp64Milli({${p}:Int64}, 'UTC')`;

/** [from, to) in Unix seconds. */
type Span = readonly [from: number, to: number];

const hourS = 3600;
const dayS = 86_400;
const tierColumns = { minutes: 'ts', hours: 'toStartOfHour(ts)', days: 'toStartOfDay(ts)' } as const;
export type Tiers = Record<keyof typeof tierColumns, Span[]>;

/**
 * A range cut into the whole UTC days within it, the whole hours beside them and the minutes left at its edges, so a
 * `sum` table with `timeRollups` (metric/pipeline.ts) is read from its daily and hourly projections but at the edges.
 */
export function tiers(r: Range): Tiers {
  const from = r.from / 1000;
  const to = r.to / 1000;
  const fh = Math.ceil(from / hourS) * hourS;
  const th = Math.floor(to / hourS) * hourS;
  const spans = (...s: Span[]): Span[] => s.filter(([a, b]) => a < b);
  if (fh >= th) return { minutes: spans([from, to]), hours: [], days: [] };
  const fd = Math.ceil(fh / dayS) * dayS;
  const td = Math.floor(th / dayS) * dayS;
  const minutes = spans([from, fh], [th, to]);
  if (fd >= td) return { minutes, hours: spans([fh, th]), days: [] };
  return { minutes, hours: spans([fh, fd], [td, th]), days: spans([fd, td]) };
}

/**
 * Σ `values` of a `sum` table over a range by `by` columns, each tier read by its own branch of one UNION ALL
 * (ClickHouse picks the projection per branch): one query instead of one per tier, since embedded ClickHouse runs one
 * at a time. Keys come back as ClickHouse writes them in JSON, sums as numbers.
 */
export async function sumsBy(
  client: ClickHouseClient,
  table: string,
  by: readonly string[],
  values: readonly string[],
  tenant: string,
  r: Range,
): Promise<Array<{ keys: unknown[]; sums: number[] }>> {
  const params: Record<string, string | number> = { tenant };
  const branches: string[] = [];
  const keys = by.map((b, i) => `${b} AS k${i}`).join(', ');
  const keyNames = by.map((_, i) => `k${i}`).join(', ');
  let i = 0;
  for (const [tier, spans] of Object.entries(tiers(r))) {
    if (spans.length === 0) continue;
    const column = tierColumns[tier as keyof Tiers];
    const within = spans.map(([a, b]) => {
      i++;
      params[`a${i}`] = a;
      params[`b${i}`] = b;
      return `(${inRange(column, `a${i}`, `b${i}`)})`;
    });
    branches.push(
      `SELECT ${keys}, ${values.map((v, j) => `sum(${v}) AS v${j}`).join(', ')} FROM ${table} WHERE tenant = {tenant:String} AND (${within.join(' OR ')}) GROUP BY ${keyNames}`,
    );
  }
  if (branches.length === 0) return [];
  const rows = await select<Record<string, unknown>>(
    client,
    `SELECT ${keyNames}, ${values.map((_, j) => `sum(v${j}) AS v${j}`).join(', ')} FROM (${branches.join(' UNION ALL ')}) GROUP BY ${keyNames}`,
    params,
  );
  return rows.map((row) => ({
    keys: by.map((_, k) => row[`k${k}`]),
    sums: values.map((_, j) => Number(row[`v${j}`])),
  }));
}

/** Named spans of time, each as the names of its two Unix-second parameters (from, to). */
export type Spans = Record<string, readonly [from: string, to: string]>;

/** Per span, the sum of `expr` over the rows of a bucketed time column within it, in the column of the span's name. */
export const sumsIn = (spans: Spans, expr: string, column = 'ts'): string =>
  Object.entries(spans)
    .map(([name, [from, to]]) => `sumIf(${expr}, ${inRange(column, from, to)}) AS ${name}`)
    .join(', ');

/** A bucketed time column within the range (parameters of Unix seconds). */
export const inRange = (column = 'ts', from = 'from_s', to = 'to_s'): string =>
  `${column} >= toDateTime({${from}:UInt32}, 'UTC') AND ${column} < toDateTime({${to}:UInt32}, 'UTC')`;

/** (a - b) / b × 100; 0 when both are 0 and 100 when only b is (docs/metrics.md `wow_delta`). */
export function changePct(a: number, b: number): number {
  if (b === 0) return a === 0 ? 0 : 100;
  return ((a - b) / b) * 100;
}

export const hours = (ms: number): number => ms / 3_600_000;
