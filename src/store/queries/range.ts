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

/** Run a parameterised query (values travel as `{name:Type}` parameters, never in the SQL text). */
export async function select<T>(client: ClickHouseClient, query: string, params: Record<string, string | number | readonly string[]>): Promise<T[]> {
  const result = await client.query({ query, query_params: params, format: 'JSONEachRow' });
  return result.json<T>();
}

/** Parameters for a tenant and a range: seconds for DateTime columns, milliseconds for DateTime64(3) ones. */
export function rangeParams(tenant: string, r: Range): Record<string, string | number> {
  return { tenant, from_s: r.from / 1000, to_s: r.to / 1000, from_ms: r.from, to_ms: r.to };
}

/** A DateTime64(3) value from a `{name:Int64}` parameter of Unix milliseconds. */
export const msParam = (p: string): string => `fromUnixTimestamp64Milli({${p}:Int64}, 'UTC')`;

/**
 * The `session_hours` rows of a tenant's sessions that overlap [from, to), latest versions: only the hours of the
 * range are read (the primary key), and a session has a row in each hour its span touches. Read with FINAL; the
 * conditions on the span are a WHERE, applied after FINAL has picked each row's latest version.
 */
export const sessionRowsInRange = (columns: readonly string[], from = 'from_ms', to = 'to_ms'): string =>
  `SELECT ${columns.join(', ')} FROM session_hours FINAL
  PREWHERE hour >= toStartOfHour(${msParam(from)}) AND hour < ${msParam(to)}
  WHERE tenant = {tenant:String} AND first_ts < ${msParam(to)} AND last_ts >= ${msParam(from)}`;

/**
 * The sessions of a tenant in a range (docs/metrics.md): first_ts < to and last_ts >= from, one row each. Of a
 * session's rows in the range's hours, the one kept is that of its first hour within the range: the hour of its
 * first_ts, or the range's first hour when it started earlier (docs/store.md "Reading sessions").
 */
export const sessionsInRange = (columns: readonly string[], from = 'from_ms', to = 'to_ms'): string => `(
  ${sessionRowsInRange(columns, from, to)}
    AND hour = greatest(toStartOfHour(first_ts), toStartOfHour(${msParam(from)}))
)`;

/** A bucketed time column within the range. */
export const inRange = (column = 'ts'): string => `${column} >= toDateTime({from_s:UInt32}, 'UTC') AND ${column} < toDateTime({to_s:UInt32}, 'UTC')`;

/** (a - b) / b × 100; 0 when both are 0 and 100 when only b is (docs/metrics.md `wow_delta`). */
export function changePct(a: number, b: number): number {
  if (b === 0) return a === 0 ? 0 : 100;
  return ((a - b) / b) * 100;
}

export const hours = (ms: number): number => ms / 3_600_000;
