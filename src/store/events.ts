import type { ClickHouseClient, ClickHouseSettings } from '@clickhouse/client';
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

/** The columns read back to rebuild events for the pipelines, as the JSON format returns them (times as text). */
export type StoredEvent = Pick<
  EventRow,
  'tenant' | 'env' | 'event_type' | 'event_id' | 'anonymous_id' | 'user_id' | 'session_id' | 'content_id' | 'content_type' | 'content_title' | 'position_sec' | 'bitrate_kbps' | 'country' | 'region' | 'device' | 'pop' | 'properties'
> & { ts: string; client_ts: string | null; received_at: string };

export const storedColumns =
  'tenant, env, event_type, ts, client_ts, received_at, event_id, anonymous_id, user_id, session_id, content_id, content_type, content_title, position_sec, bitrate_kbps, country, region, device, pop, properties';

/** The event types of a session's state machine (docs/metrics.md "Sessions"). */
export const sessionEventTypes = ['play_start', 'first_frame', 'heartbeat', 'pause', 'resume', 'seek_start', 'seek_end', 'rebuffer_start', 'rebuffer_end', 'bitrate_change', 'error', 'ended', 'session_end'];

const ms = (dt: string): number => Date.parse(`${dt.replace(' ', 'T')}Z`);

/** A stored row back into the event the pipelines saw (only the fields they read). */
export function toEvent(r: StoredEvent): WireEvent {
  const opt = (v: string): string | undefined => (v === '' ? undefined : v);
  return {
    tenant: r.tenant,
    env: r.env as WireEvent['env'],
    event_type: r.event_type,
    ts: ms(r.ts),
    client_ts: r.client_ts === null ? null : ms(r.client_ts),
    received_at: ms(r.received_at),
    event_id: opt(r.event_id),
    anonymous_id: opt(r.anonymous_id),
    user_id: opt(r.user_id),
    session_id: opt(r.session_id),
    content_id: opt(r.content_id),
    content_type: opt(r.content_type),
    content_title: opt(r.content_title),
    position_sec: r.position_sec ?? undefined,
    bitrate_kbps: r.bitrate_kbps ?? undefined,
    country: r.country,
    region: r.region,
    device: r.device,
    context: r.pop === '' ? undefined : { pop: r.pop },
    properties: JSON.parse(r.properties) as Record<string, unknown>,
  };
}

/** Which sessions' stored events an aggregator asks for (docs/aggregation.md "Late events"). */
export interface HistoryRequest {
  tenant: string;
  sessions: string[];
  /** Events the shard read before its input message of this sequence... */
  before_seq: number;
  /**
   * ...or received before this time (Unix ms): events of an events stream made again (its sequences restart at 1)
   * are older than any session still in memory.
   */
  received_before: number;
  /** Rows to skip: the events of earlier answers to the same request. */
  offset: number;
}

/**
 * The session events of these sessions that an aggregator had read before a given input message, in the order it
 * read them: always the same answer for the same request, so a shard replaying its input after a crash rebuilds the
 * same state. At most `limit` rows from `offset`.
 */
export async function sessionHistory(client: ClickHouseClient, req: HistoryRequest, limit: number, settings?: ClickHouseSettings): Promise<WireEvent[]> {
  const result = await client.query({
    query: `SELECT ${storedColumns} FROM events
      WHERE tenant = {tenant:String} AND session_id IN {sessions:Array(String)} AND event_type IN {types:Array(String)}
        AND (ingest_seq < {before_seq:UInt64} OR received_at < fromUnixTimestamp64Milli({received_before:Int64}, 'UTC'))
      ORDER BY ingest_seq, ingest_index, session_id, event_id
      LIMIT {limit:UInt32} OFFSET {offset:UInt32}`,
    query_params: { ...req, types: sessionEventTypes, limit },
    format: 'JSONEachRow',
    clickhouse_settings: settings,
  });
  return (await result.json<StoredEvent>()).map(toEvent);
}
