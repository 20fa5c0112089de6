import type { ClickHouseClient } from '@clickhouse/client';
import { mark, windowSpanS, windowStepS, type Dim } from '../../../pipelines/viewers.js';
import { msParam, rangeParams, select, sessionsInRange, type Range } from './range.js';

const hourMs = 3_600_000;

/** How each dimension's value reads in `session_hours`. */
const sessionValue: Record<Dim, string> = { '': "''", region: 'toString(region)', content: 'content_id' };

/**
 * Distinct viewers per value of `dim` ('' counts all of a tenant's) in each range, exact (docs/store.md "Viewer
 * windows"): a viewer counts when a session of theirs is in the range (first_ts < to and last_ts >= from), that is
 * when their row in the window holds one of these:
 * - a session touched a whole hour of the range;
 * - one started in its last, partial hour before its end;
 * - one touched its first, partial hour and is among the sessions of that hour that end at or after `from` (read
 *   from `session_hours`; short-circuit evaluation looks up only the rows that need it).
 * A session in the range that touches no whole hour of it lies within one of those two partial hours, so nothing else
 * can put a viewer in it. One scan of one window answers every range.
 *
 * Null when the ranges do not lie within one window (longer than 32 days, as `qtd` can be) or one has no whole hour:
 * the caller counts from sessions instead.
 */
export async function viewersBy(client: ClickHouseClient, tenant: string, dim: Dim, ranges: readonly Range[]): Promise<Map<string, number[]> | null> {
  const hourOf = (ms: number): number => Math.floor(ms / hourMs) * hourMs;
  const w = Math.floor(Math.min(...ranges.map((r) => hourOf(r.from))) / 1000 / windowStepS) * windowStepS;
  if (ranges.some((r) => hourOf(r.to) / 1000 >= w + windowSpanS || Math.ceil(r.from / hourMs) >= Math.floor(r.to / hourMs))) return null;
  const at = (ms: number): number => ((hourOf(ms) / 1000 - w) / 3600) * mark.perHour;
  const params: Record<string, string | number> = { tenant, dim, w };
  const counts = ranges.map((r, i) => {
    Object.assign(params, {
      [`whole${i}`]: at(r.from + hourMs - 1),
      [`last${i}`]: at(r.to),
      [`before${i}`]: at(r.to) + mark.startedAt + Math.floor((r.to % hourMs) / 60_000),
      [`first${i}`]: at(r.from) + mark.touched,
      [`from${i}`]: r.from,
      [`hour${i}`]: hourOf(r.from) / 1000,
    });
    const whole = `(m >= {whole${i}:UInt32} AND m < {last${i}:UInt32} AND m % ${mark.perHour} = ${mark.touched})`;
    const startsBefore = `(m >= {last${i}:UInt32} AND m < {before${i}:UInt32})`;
    // FINAL sums the map only when the query reads all of its columns: `n` is read for that (docs/store.md).
    const marked = (condition: string): string => `arrayExists((m, n) -> n > 0 AND ${condition}, spanMap.mark, spanMap.sessions)`;
    if (r.from % hourMs === 0) return `countIf(${marked(`(${whole} OR ${startsBefore})`)}) AS n${i}`;
    const endsAfter = `SELECT DISTINCT ${sessionValue[dim]}, viewer FROM session_hours FINAL PREWHERE hour = toDateTime({hour${i}:UInt32}, 'UTC')
      WHERE tenant = {tenant:String} AND notEmpty(viewer) ${dim === 'content' ? 'AND notEmpty(content_id)' : ''} AND last_ts >= ${msParam(`from${i}`)}`;
    return `countIf(${marked(`(${whole} OR ${startsBefore})`)} OR (${marked(`m = {first${i}:UInt32}`)} AND (value, viewer) IN (${endsAfter}))) AS n${i}`;
  });
  const rows = await select<Record<string, string>>(
    client,
    `SELECT value, ${counts.join(', ')} FROM viewer_windows FINAL
     WHERE tenant = {tenant:String} AND ts = toDateTime({w:UInt32}, 'UTC') AND dim = {dim:String}
     GROUP BY value
     SETTINGS short_circuit_function_evaluation = 'force_enable'`,
    params,
  );
  return new Map(rows.map((row) => [row.value!, ranges.map((_, i) => Number(row[`n${i}`]))]));
}

/**
 * Below this length a range's sessions are fewer to read than a window's rows (bench/RESULTS.md: at 100M events, a
 * day's content viewers 24 ms from sessions and 35 from the window; a week's 64 and 29).
 */
const windowedFromMs = 3 * 86_400_000;

/** Distinct viewers per value of `dim` in one range: from `viewer_windows` for long ranges, else from its sessions. */
export async function viewersIn(client: ClickHouseClient, tenant: string, dim: Dim, range: Range): Promise<Map<string, number>> {
  const windowed = range.to - range.from >= windowedFromMs ? await viewersBy(client, tenant, dim, [range]) : null;
  if (windowed) return new Map([...windowed].map(([value, [n]]) => [value, n!]));
  const rows = await select<{ value: string; n: string }>(
    client,
    `SELECT ${sessionValue[dim]} AS value, uniqExact(viewer_key) AS n FROM ${sessionsInRange(['region', 'content_id', 'viewer_key'])}
     WHERE viewer_key != 0 ${dim === 'content' ? 'AND notEmpty(content_id)' : ''} GROUP BY value`,
    rangeParams(tenant, range),
  );
  return new Map(rows.map((r) => [r.value, Number(r.n)]));
}
