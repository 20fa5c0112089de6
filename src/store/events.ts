import type { ClickHouseClient } from '@clickhouse/client';
import type { WireEvent } from '../bus/wire.js';

/** A row of the `events` table. Times are Unix milliseconds (ClickHouse reads them as DateTime64(3)). */
export interface EventRow {
  tenant: string;
  env: string;
  event_type: string;
  ts: number;
  client_ts: number | null;
  received_at: number;
  event_id: string;
  anonymous_id: string;
  user_id: string;
  session_id: string;
  content_id: string;
  content_type: string;
  content_title: string;
  position_sec: number | null;
  bitrate_kbps: number | null;
  country: string;
  region: string;
  device: string;
  app_version: string;
  os: string;
  browser: string;
  player: string;
  cdn: string;
  pop: string;
  user_agent: string;
  properties: string;
  ingest_seq: number;
  ingest_index: number;
}

/**
 * `context` is flattened into columns (all but `ip`, which is used for geo at ingest and not kept: raw events live
 * for a year, and an address is personal data); `properties` is kept as JSON text. (`ingest_seq`, `ingest_index`) is
 * the event's place in the ingest stream: its identity across redeliveries when it has no `event_id`.
 */
export function eventRow(e: WireEvent, ingestSeq: number, ingestIndex: number): EventRow {
  const c = e.context ?? {};
  return {
    tenant: e.tenant,
    env: e.env,
    event_type: e.event_type,
    ts: e.ts,
    client_ts: e.client_ts,
    received_at: e.received_at,
    event_id: e.event_id ?? '',
    anonymous_id: e.anonymous_id ?? '',
    user_id: e.user_id ?? '',
    session_id: e.session_id ?? '',
    content_id: e.content_id ?? '',
    content_type: e.content_type ?? '',
    content_title: e.content_title ?? '',
    position_sec: e.position_sec ?? null,
    bitrate_kbps: e.bitrate_kbps ?? null,
    country: e.country,
    region: e.region,
    device: e.device,
    app_version: c.app_version ?? '',
    os: c.os ?? '',
    browser: c.browser ?? '',
    player: c.player ?? '',
    cdn: c.cdn ?? '',
    pop: c.pop ?? '',
    user_agent: c.user_agent ?? '',
    properties: JSON.stringify(e.properties ?? {}),
    ingest_seq: ingestSeq,
    ingest_index: ingestIndex,
  };
}

/**
 * One insert. `token` makes it idempotent: the same token within the table's de-duplication window (100,000
 * inserts) stores nothing the second time, so a batch written again after a crash is not doubled.
 */
export async function insertEvents(client: ClickHouseClient, rows: readonly EventRow[], token: string): Promise<void> {
  if (rows.length === 0) return;
  await client.insert({
    table: 'events',
    values: rows as EventRow[],
    format: 'JSONEachRow',
    clickhouse_settings: { insert_deduplication_token: token },
  });
}
