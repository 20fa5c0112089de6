import type { ClickHouseClient } from '@clickhouse/client';
import { msParam, rangeParams, select, type Range } from '../../src/store/queries/range.js';
import type { DeviceItem } from './answer.js';
import { sessionHours } from './pipeline.js';

/**
 * The `session_hours` rows of a tenant's sessions that overlap [from, to), latest versions: only the hours of the
 * range are read (the primary key), and a session has a row in each hour its span touches. Read with FINAL; the
 * conditions on the span are a WHERE, applied after FINAL has picked each row's latest version.
 */
export const sessionRowsInRange = (columns: readonly string[], from = 'from_ms', to = 'to_ms'): string =>
  `SELECT ${columns.join(', ')} FROM ${sessionHours.name} FINAL
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

/** docs/metrics.md "Devices": sessions in the range per device, and their share. */
export async function devices(client: ClickHouseClient, tenant: string, range: Range): Promise<DeviceItem[]> {
  const rows = await select<{ device: string; sessions: string }>(
    client,
    `SELECT device, count() AS sessions FROM ${sessionsInRange(['device'])} GROUP BY device`,
    rangeParams(tenant, range),
  );
  const total = rows.reduce((s, r) => s + Number(r.sessions), 0);
  return rows
    .map((r) => ({
      device: r.device === '' ? 'unknown' : r.device,
      sessions: Number(r.sessions),
      share_pct: total === 0 ? 0 : (Number(r.sessions) / total) * 100,
    }))
    .sort((a, b) => b.sessions - a.sessions || (a.device < b.device ? -1 : 1));
}
