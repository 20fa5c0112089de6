import type { ClickHouseClient } from '@clickhouse/client';
import { viewerWindows, windowSpanS, windowStepS, type Dim } from './pipeline.js';
import { msParam, rangeParams, select, type Query, type Range } from '../../src/store/queries/range.js';
import { sessionsInRange } from '../audience/read.js';
import { sessionHours } from '../audience/pipeline.js';

const hourMs = 3_600_000;

/** How each dimension's value reads in `session_hours`. */
const sessionValue: Record<Dim, string> = { '': "''", region: 'toString(region)', content: 'content_id' };

/**
 * Distinct viewers per value of `dim` ('' counts all of a tenant's) in each range, exact (docs/store.md "Viewer
 * windows"): a viewer counts when a session of theirs is in the range (first_ts < to and last_ts >= from), that is
 * when a session of theirs touched a whole hour of the range (their row in the window says so), or is one of the
 * range's sessions in its partial first or last hour (read from `session_hours` and matched by `pair_key`). A session
 * in the range that touches no whole hour of it lies within one of those two hours, so nothing else can put a viewer
 * in it. One scan of one window answers every range.
 *
 * Null when the ranges do not lie within one window (longer than 32 days, as `qtd` can be) or one has no whole hour:
 * the caller counts from sessions instead. With `values`, only those values are counted (a page of top content):
 * the rows are ordered by value, so the others are not read.
 */
export async function viewersBy(
  client: ClickHouseClient,
  tenant: string,
  dim: Dim,
  ranges: readonly Range[],
  values?: readonly string[],
): Promise<Map<string, number[]> | null> {
  const q = viewersQuery(tenant, dim, ranges, values);
  return q && viewerCounts(await select<ViewerRow>(client, q.query, q.params), ranges);
}

/** A row of `viewersQuery`: a value and its count in each range (`n0`, `n1`, ...), as ClickHouse writes them. */
export type ViewerRow = Record<string, string | number>;

/** The counts of `viewersQuery`'s rows, per value, in the order of its ranges. */
export const viewerCounts = (rows: readonly ViewerRow[], ranges: readonly Range[]): Map<string, number[]> =>
  new Map(rows.map((row) => [String(row.value), ranges.map((_, i) => Number(row[`n${i}`]))]));

/** The query of `viewersBy`, or null when the window cannot answer (see there). */
export function viewersQuery(
  tenant: string,
  dim: Dim,
  ranges: readonly Range[],
  values?: readonly string[],
): Query | null {
  const hourOf = (ms: number): number => Math.floor(ms / hourMs) * hourMs;
  const w = Math.floor(Math.min(...ranges.map((r) => hourOf(r.from))) / 1000 / windowStepS) * windowStepS;
  if (
    ranges.some(
      (r) => hourOf(r.to) / 1000 >= w + windowSpanS || Math.ceil(r.from / hourMs) >= Math.floor(r.to / hourMs),
    )
  )
    return null;
  const offset = (ms: number): number => (hourOf(ms) / 1000 - w) / 3600;
  const params: Query['params'] = { tenant, dim, w, ...(values && { values }) };
  const counts = ranges.map((r, i) => {
    Object.assign(params, {
      [`a${i}`]: offset(r.from + hourMs - 1),
      [`b${i}`]: offset(r.to),
      [`f${i}`]: r.from,
      [`t${i}`]: r.to,
    });
    // FINAL sums the map only when the query reads all of its columns: `n` is read for that (docs/store.md).
    const whole = `arrayExists((h, n) -> n > 0 AND h >= {a${i}:UInt16} AND h < {b${i}:UInt16}, hourMap.hour, hourMap.sessions)`;
    const partial = [r.from % hourMs === 0 ? null : hourOf(r.from), r.to % hourMs === 0 ? null : hourOf(r.to)].filter(
      (h): h is number => h !== null,
    );
    if (partial.length === 0) return `countIf(${whole}) AS n${i}`;
    const edgeSessions = `SELECT cityHash64({dim:String}, ${sessionValue[dim]}, viewer) FROM ${sessionHours.name} FINAL
      PREWHERE hour IN (${partial.map((h) => `toDateTime(${h / 1000}, 'UTC')`).join(', ')})
      WHERE tenant = {tenant:String} AND notEmpty(viewer) ${dim === 'content' ? 'AND notEmpty(content_id)' : ''}
        AND first_ts < ${msParam(`t${i}`)} AND last_ts >= ${msParam(`f${i}`)}`;
    return `countIf(${whole} OR pair_key IN (${edgeSessions})) AS n${i}`;
  });
  // All of a tenant's viewers have one value, '': no grouping (a third of the scan's time at 600k viewers).
  const grouped = dim !== '';
  return {
    query: `SELECT ${grouped ? 'value' : "'' AS value"}, ${counts.join(', ')} FROM ${viewerWindows.name} FINAL
     WHERE tenant = {tenant:String} AND ts = toDateTime({w:UInt32}, 'UTC') AND dim = {dim:String} ${values ? 'AND value IN {values:Array(String)}' : ''}
     ${grouped ? 'GROUP BY value' : ''}`,
    params,
  };
}

/**
 * Below this length a range's sessions are fewer to read than a window's rows (bench/RESULTS.md: at 100M events, a
 * day's content viewers 24 ms from sessions and 35 from the window; a week's 64 and 29).
 */
const windowedFromMs = 3 * 86_400_000;

/**
 * Distinct viewers per value of `dim` in one range (of `values` only, when given): from `viewer_windows` for long
 * ranges, else from its sessions.
 */
export async function viewersIn(
  client: ClickHouseClient,
  tenant: string,
  dim: Dim,
  range: Range,
  values?: readonly string[],
): Promise<Map<string, number>> {
  if (values?.length === 0) return new Map();
  const windowed =
    range.to - range.from >= windowedFromMs ? await viewersBy(client, tenant, dim, [range], values) : null;
  // A window also holds values seen only outside the range: listed here, they would appear in geo and top content.
  if (windowed) return new Map([...windowed].filter(([, [n]]) => n! > 0).map(([value, [n]]) => [value, n!]));
  const rows = await select<{ value: string; n: string }>(
    client,
    `SELECT ${sessionValue[dim]} AS value, uniqExact(viewer_key) AS n FROM ${sessionsInRange(['region', 'content_id', 'viewer_key'])}
     WHERE viewer_key != 0 ${dim === 'content' ? 'AND notEmpty(content_id)' : ''} ${values ? `AND ${sessionValue[dim]} IN {values:Array(String)}` : ''} GROUP BY value`,
    { ...rangeParams(tenant, range), ...(values && { values }) },
  );
  return new Map(rows.map((r) => [r.value, Number(r.n)]));
}
