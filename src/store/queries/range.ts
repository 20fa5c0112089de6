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

/**
 * The sessions of a tenant in a range (docs/metrics.md): their latest row, then first_ts < to and last_ts >= from.
 * Only `columns` are read: FINAL merges every column it is asked for, and at a million sessions that is the cost.
 * The range is a PREWHERE, applied before FINAL merges versions, so old sessions are never merged at all. That is
 * exact because a session's versions only widen: `last_ts` never falls and `first_ts` never rises from one version to
 * the next, so if any version of a session is in the range, its latest is too (docs/store.md).
 */
export const sessionsInRange = (columns: readonly string[], from = 'from_ms', to = 'to_ms'): string => `(
  SELECT ${columns.join(', ')} FROM sessions FINAL
  PREWHERE first_ts < fromUnixTimestamp64Milli({${to}:Int64}, 'UTC') AND last_ts >= fromUnixTimestamp64Milli({${from}:Int64}, 'UTC')
  WHERE tenant = {tenant:String}
)`;

/** A bucketed time column within the range. */
export const inRange = (column = 'ts'): string => `${column} >= toDateTime({from_s:UInt32}, 'UTC') AND ${column} < toDateTime({to_s:UInt32}, 'UTC')`;

/** (a - b) / b × 100; 0 when both are 0 and 100 when only b is (docs/metrics.md `wow_delta`). */
export function changePct(a: number, b: number): number {
  if (b === 0) return a === 0 ? 0 : 100;
  return ((a - b) / b) * 100;
}

export const hours = (ms: number): number => ms / 3_600_000;
