import type { ClickHouseClient, ClickHouseSettings } from '@clickhouse/client';
import type { HistoryRequest } from '../contracts/history.js';
import type { WireEvent } from '../bus/wire.js';
import { insertTsv, type TsvLines, tsvMs, tsvString } from './tsv.js';

/** The columns of the `events` table a line carries, in order. Times are DateTime64(3). */
export const eventColumns = [
  'tenant',
  'env',
  'event_type',
  'ts',
  'client_ts',
  'received_at',
  'event_id',
  'anonymous_id',
  'user_id',
  'session_id',
  'content_id',
  'content_type',
  'content_title',
  'position_sec',
  'bitrate_kbps',
  'country',
  'region',
  'device',
  'app_version',
  'os',
  'browser',
  'player',
  'cdn',
  'pop',
  'user_agent',
  'properties',
  'ingest_seq',
  'ingest_index',
] as const;

const text = (v: string | undefined): string => (v === undefined ? '' : tsvString(v));
const count = (v: number | undefined): string => (v === undefined ? '\\N' : String(v));

/**
 * An event as a line of the `events` table (TabSeparated, `eventColumns`). `context` is flattened into columns (all
 * but `ip`, which is used for geo at ingest and not kept: raw events live for a year, and an address is personal
 * data); `properties` is kept as JSON text. (`ingest_seq`, `ingest_index`) is the event's place in the ingest stream:
 * its identity across redeliveries when it has no `event_id`.
 */
export function eventLine(e: WireEvent, ingestSeq: number, ingestIndex: number): string {
  const c = e.context ?? {};
  return `${tsvString(e.tenant)}\t${e.env}\t${tsvString(e.event_type)}\t${tsvMs(e.ts)}\t${e.client_ts === null ? '\\N' : tsvMs(e.client_ts)}\t${tsvMs(e.received_at)}\t${text(e.event_id)}\t${text(e.anonymous_id)}\t${text(e.user_id)}\t${text(e.session_id)}\t${text(e.content_id)}\t${text(e.content_type)}\t${text(e.content_title)}\t${count(e.position_sec)}\t${count(e.bitrate_kbps)}\t${tsvString(e.country)}\t${tsvString(e.region)}\t${tsvString(e.device)}\t${text(c.app_version)}\t${text(c.os)}\t${text(c.browser)}\t${text(c.player)}\t${text(c.cdn)}\t${text(c.pop)}\t${text(c.user_agent)}\t${tsvString(JSON.stringify(e.properties ?? {}))}\t${ingestSeq}\t${ingestIndex}\n`;
}

/**
 * One insert of lines from `eventLine` or `EventLines`. `token` makes it idempotent: the same token within the
 * table's de-duplication window (100,000 inserts) stores nothing the second time, so a batch written again after a
 * crash is not doubled.
 */
export async function insertEvents(client: ClickHouseClient, body: TsvLines, token: string): Promise<void> {
  await insertTsv(client, 'events', eventColumns, body, token);
}

/** The columns read back to rebuild events for the pipelines, as the JSON format returns them (times as text). */
export interface StoredEvent {
  tenant: string;
  env: string;
  event_type: string;
  ts: string;
  client_ts: string | null;
  received_at: string;
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
  player: string;
  cdn: string;
  pop: string;
  properties: string;
}

export const storedColumns =
  'tenant, env, event_type, ts, client_ts, received_at, event_id, anonymous_id, user_id, session_id, content_id, content_type, content_title, position_sec, bitrate_kbps, country, region, device, app_version, player, cdn, pop, properties';

/** The event types of a session's state machine (docs/metrics.md "Sessions"). */
export const sessionEventTypes = [
  'play_start',
  'first_frame',
  'heartbeat',
  'pause',
  'resume',
  'seek_start',
  'seek_end',
  'rebuffer_start',
  'rebuffer_end',
  'bitrate_change',
  'error',
  'ended',
  'session_end',
];

const ms = (dt: string): number => Date.parse(`${dt.replace(' ', 'T')}Z`);

/** The `context` keys the aggregator reads (session attributes, segment values), as stored; undefined when none is. */
function storedContext(r: StoredEvent): Record<string, string> | undefined {
  let context: Record<string, string> | undefined;
  for (const key of ['app_version', 'player', 'cdn', 'pop'] as const) if (r[key] !== '') (context ??= {})[key] = r[key];
  return context;
}

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
    context: storedContext(r),
    properties: JSON.parse(r.properties) as Record<string, unknown>,
  };
}

/**
 * The session events of these sessions that an aggregator had read before a given input message, in the order it
 * read them: always the same answer for the same request, so a shard replaying its input after a crash rebuilds the
 * same state. At most `limit` rows from `offset`.
 */
export async function sessionHistory(
  client: ClickHouseClient,
  req: Omit<HistoryRequest, 'stored_through'>,
  limit: number,
  settings?: ClickHouseSettings,
): Promise<WireEvent[]> {
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
