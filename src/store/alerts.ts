import type { ClickHouseClient } from '@clickhouse/client';
import { select } from './queries/range.js';

export const severities = ['critical', 'warning', 'info'] as const;
export type Severity = (typeof severities)[number];

/** An alert as the API answers it (docs/api.md). */
export interface Alert {
  id: number;
  severity: string;
  source: string;
  category: string;
  title: string;
  description: string;
  data: Record<string, unknown>;
  acknowledged: boolean;
  acknowledged_at: string | null;
  created_at: string;
  resolved_at: string | null;
}

/** One version of an alert, as the alerts role writes it. */
export interface AlertRow {
  tenant: string;
  id: number;
  category: string;
  severity: string;
  source: string;
  title: string;
  description: string;
  data: Record<string, unknown>;
  created_at: number;
  resolved_at: number | null;
  version: number;
}

export interface AlertFilter {
  limit: number;
  offset: number;
  acknowledged?: boolean;
  severity?: string;
  id?: number;
}

interface StoredAlert {
  id: string;
  severity: string;
  source: string;
  category: string;
  title: string;
  description: string;
  data: string;
  created_at: string;
  resolved_at: string | null;
  acknowledged_at: string | null;
  total: string;
}

const iso = (clickhouseTime: string): string => new Date(`${clickhouseTime.replace(' ', 'T')}Z`).toISOString();

// Timestamps leave ClickHouse as text in UTC ('YYYY-MM-DD hh:mm:ss.sss'), the same from chDB and a server.
const listSql = (
  where: string,
): string => `SELECT toString(a.id) AS id, a.severity AS severity, a.source AS source, a.category AS category,
    a.title AS title, a.description AS description, a.data AS data,
    toString(a.created_at) AS created_at, if(isNull(a.resolved_at), NULL, toString(a.resolved_at)) AS resolved_at,
    if(k.id = 0, NULL, toString(k.acknowledged_at)) AS acknowledged_at,
    count() OVER () AS total
  FROM (SELECT * FROM alerts FINAL WHERE tenant = {tenant:String}) AS a
  LEFT JOIN (SELECT id, min(acknowledged_at) AS acknowledged_at FROM alert_acks WHERE tenant = {tenant:String} GROUP BY id) AS k ON a.id = k.id
  WHERE ${where}
  ORDER BY a.created_at DESC, a.id DESC
  LIMIT {limit:UInt32} OFFSET {offset:UInt32}`;

/** A tenant's alerts, newest first, and how many match before paging. */
export async function listAlerts(
  client: ClickHouseClient,
  tenant: string,
  filter: AlertFilter,
): Promise<{ alerts: Alert[]; total: number }> {
  const where = ['1'];
  const params: Record<string, string | number> = { tenant, limit: filter.limit, offset: filter.offset };
  if (filter.acknowledged !== undefined) where.push(filter.acknowledged ? 'k.id != 0' : 'k.id = 0');
  if (filter.severity !== undefined) {
    where.push('a.severity = {severity:String}');
    params.severity = filter.severity;
  }
  if (filter.id !== undefined) {
    where.push('a.id = {id:UInt64}');
    params.id = filter.id;
  }
  const rows = await select<StoredAlert>(client, listSql(where.join(' AND ')), params);
  let total = Number(rows[0]?.total ?? 0);
  if (rows.length === 0 && filter.offset > 0) {
    // Past the end, the window count has no row to ride on: count separately.
    total = (await listAlerts(client, tenant, { ...filter, limit: 1, offset: 0 })).total;
  }
  return {
    total,
    alerts: rows.map((r) => ({
      id: Number(r.id),
      severity: r.severity,
      source: r.source,
      category: r.category,
      title: r.title,
      description: r.description,
      data: JSON.parse(r.data) as Record<string, unknown>,
      acknowledged: r.acknowledged_at !== null,
      acknowledged_at: r.acknowledged_at === null ? null : iso(r.acknowledged_at),
      created_at: iso(r.created_at),
      resolved_at: r.resolved_at === null ? null : iso(r.resolved_at),
    })),
  };
}

export async function getAlert(client: ClickHouseClient, tenant: string, id: number): Promise<Alert | null> {
  return (await listAlerts(client, tenant, { limit: 1, offset: 0, id })).alerts[0] ?? null;
}

/** Acknowledge once: the first acknowledgement's time stands; an unknown id (or another tenant's) is null. */
export async function acknowledgeAlert(
  client: ClickHouseClient,
  tenant: string,
  id: number,
  now = Date.now(),
): Promise<Alert | null> {
  const alert = await getAlert(client, tenant, id);
  if (!alert || alert.acknowledged) return alert;
  // One token per alert: of two acknowledgements racing in different api processes, the store keeps the first written.
  await client.insert({
    table: 'alert_acks',
    values: [{ tenant, id, acknowledged_at: now }],
    format: 'JSONEachRow',
    clickhouse_settings: { insert_deduplication_token: `ack:${tenant}:${id}` },
  });
  return getAlert(client, tenant, id);
}

/**
 * Write versions of alerts (the alerts role's flush); `token` makes a redelivered write store nothing. Every insert
 * names its token: settings stick to an embedded ClickHouse session, so an insert without one would reuse the last.
 */
export async function insertAlerts(client: ClickHouseClient, rows: readonly AlertRow[], token: string): Promise<void> {
  if (rows.length === 0) return;
  await client.insert({
    table: 'alerts',
    values: rows.map((r) => ({ ...r, data: JSON.stringify(r.data) })),
    format: 'JSONEachRow',
    clickhouse_settings: { insert_deduplication_token: token },
  });
}
