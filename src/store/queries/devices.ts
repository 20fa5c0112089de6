import type { ClickHouseClient } from '@clickhouse/client';
import { rangeParams, select, type Range } from './range.js';
import { sessionsInRange } from './sessions.js';
import type { DeviceItem } from './answers.js';

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
