import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import { OperatorError } from '../operator-error.js';
import { snapshotTables, pipelines } from '../../pipelines/index.js';
import type { Cell, TableSpec } from '../metric/pipeline.js';
import { Aggregation } from '../aggregate/runtime.js';
import { rankOf } from '../aggregate/session.js';
import { sessionEventTypes, storedColumns, toEvent, type StoredEvent } from '../store/events.js';
import { derivedTables, insertSnapshotRows, refreshDerived, timeColumn } from '../store/snapshots.js';

export interface ReplayRequest {
  tenant: string;
  /** Unix milliseconds, whole minutes, from < to. */
  from: number;
  to: number;
}

export interface ReplayResult {
  tenant: string;
  from: string;
  to: string;
  events: number;
  sessions: number;
  rows: Record<string, number>;
}

export class ReplayError extends OperatorError {
  override name = 'ReplayError';
}

/** A segment's effect reaches 30 s past its event (concurrency): sessions with an event this far before count. */
const reachMs = 31_000;

/** The parameters of the statements below for a request. */
const replayParams = (req: ReplayRequest): Record<string, string | number | string[]> => ({
  tenant: req.tenant,
  from_ms: req.from,
  to_ms: req.to,
  reach_ms: req.from - reachMs,
  types: sessionEventTypes,
});

/** A DateTime64 column in [`from`, to_ms) (parameters of Unix milliseconds). */
const inRange = (column: string, from = 'from_ms'): string =>
  `${column} >= fromUnixTimestamp64Milli({${from}:Int64}, 'UTC') AND ${column} < fromUnixTimestamp64Milli({to_ms:Int64}, 'UTC')`;

/** The sessions replayed whole: those with a session event in the range or just before it (`reach_ms`). */
const replayedSessions = `SELECT session_id FROM events WHERE tenant = {tenant:String} AND session_id != ''
  AND event_type IN {types:Array(String)} AND ${inRange('ts', 'reach_ms')}`;

/**
 * Recompute a tenant's snapshots over [from, to) from its raw events, with today's pipelines: every snapshot row of
 * the range is deleted and written again, and the sessions with an event in (or just before) the range get their
 * session row anew. Sessions are replayed whole, so values that depend on neighbouring events are exact at the
 * range's edges. Live aggregation of the same range at the same moment would race with it: replay history.
 */
export async function replayRange(client: ClickHouseClient, req: ReplayRequest): Promise<ReplayResult> {
  if (!(req.from < req.to) || req.from % 60_000 !== 0 || req.to % 60_000 !== 0) {
    throw new ReplayError('--from and --to must be whole minutes, --from before --to');
  }
  // Whole sessions that touch the range, and every other event whose own time (or arrival, for quota) is in it.
  const result = await client.query({
    query: `SELECT ${storedColumns} FROM events
      WHERE tenant = {tenant:String} AND (
        (session_id IN (${replayedSessions}) AND event_type IN {types:Array(String)})
        OR ${inRange('ts')} OR ${inRange('received_at')})
      ORDER BY ts, ingest_seq, ingest_index`,
    query_params: replayParams(req),
    format: 'JSONEachRow',
  });
  const agg = new Aggregation(pipelines, Number.MAX_SAFE_INTEGER);
  const sessions = new Set<string>();
  let events = 0;
  // The times of every event replayed: the replayed sessions' spans lie within them.
  let first = req.from;
  let last = req.to - 1;
  for (const row of await result.json<StoredEvent>()) {
    const e = toEvent(row);
    // Outside the range, only session events are here to give the range's sessions their neighbours.
    agg.apply(e);
    events++;
    if (e.ts < first) first = e.ts;
    if (e.ts > last) last = e.ts;
    if (e.session_id !== undefined && rankOf(e.event_type, false) >= 0 && e.ts >= req.from - reachMs && e.ts < req.to)
      sessions.add(e.session_id);
  }
  const rows = agg.drain(0).rows;
  const written: Record<string, number> = {};
  const token = randomUUID();
  for (const table of snapshotTables) {
    if (table.rebuild || table.derivedFrom) continue;
    const all = rows.get(table.name) ?? [];
    // Session rows only for the sessions replayed whole (and deleted below); other rows only within the range.
    const session = table.key.findIndex(([name]) => name === 'session_id');
    const keep =
      table.engine === 'replace'
        ? all.filter((r) => sessions.has(String(r[session])))
        : all.filter((r) => within(table, r, req));
    // Derived tables refresh the keys written again as they are inserted; those of rows deleted and not written again
    // are refreshed here.
    const cleared = await keysInRange(client, table, req);
    await clear(client, table, req);
    await insertSnapshotRows(client, table, keep, `replay:${token}:${table.name}`);
    for (const [derived, keys] of cleared) await refreshDerived(client, derived, req.tenant, keys);
    written[table.name] = keep.length;
  }
  // Tables computed from the others, once these are written: every `ts` whose rows can hold the replayed spans.
  for (const table of snapshotTables.filter((t) => t.rebuild !== undefined))
    written[table.name] = await rebuild(client, table, req.tenant, first, last);
  return {
    tenant: req.tenant,
    from: new Date(req.from).toISOString(),
    to: new Date(req.to).toISOString(),
    events,
    sessions: sessions.size,
    rows: written,
  };
}

/**
 * Rewrite a `rebuild` table's rows of a tenant for every `ts` (a window start, pipelines/viewers/pipeline.ts) whose span holds
 * an hour of [first, last]; answers the rows written.
 */
async function rebuild(
  client: ClickHouseClient,
  table: TableSpec,
  tenant: string,
  first: number,
  last: number,
): Promise<number> {
  const span = (table.spanDays ?? 0) * 86_400;
  const params = { tenant, from_s: Math.floor(first / 3_600_000) * 3600 - span + 1, to_s: Math.floor(last / 1000) + 1 };
  const where =
    "tenant = {tenant:String} AND ts >= toDateTime({from_s:UInt32}, 'UTC') AND ts < toDateTime({to_s:UInt32}, 'UTC')";
  await client.command({
    query: `DELETE FROM ${table.name} WHERE ${where}`,
    query_params: params,
    clickhouse_settings: { lightweight_deletes_sync: '2' },
  });
  await client.command({ query: table.rebuild!(true), query_params: params });
  const [count] = await (
    await client.query({
      query: `SELECT count() AS n FROM ${table.name} WHERE ${where}`,
      query_params: params,
      format: 'JSONEachRow',
    })
  ).json<{ n: string }>();
  return Number(count?.n ?? 0);
}

/** A row's time (the table's `ts` key, seconds for DateTime and milliseconds for DateTime64) lies in the range. */
function within(table: TableSpec, row: readonly Cell[], req: ReplayRequest): boolean {
  const i = table.key.findIndex(([name]) => name === 'ts');
  const v = Number(row[i]);
  const t = table.key[i]![1] === 'DateTime' ? v * 1000 : v;
  return t >= req.from && t < req.to;
}

/** Per table derived from `table`, the values of its key column in the rows of the range that `clear` deletes. */
async function keysInRange(
  client: ClickHouseClient,
  table: TableSpec,
  req: ReplayRequest,
): Promise<Map<TableSpec, string[]>> {
  const out = new Map<TableSpec, string[]>();
  for (const derived of derivedTables(table)) {
    const result = await client.query({
      query: `SELECT DISTINCT toString(${derived.derivedFrom!.by}) AS k FROM ${table.name} WHERE tenant = {tenant:String} AND ${inRange(timeColumn(table))}`,
      query_params: replayParams(req),
      format: 'JSONEachRow',
    });
    out.set(
      derived,
      (await result.json<{ k: string }>()).map((r) => r.k),
    );
  }
  return out;
}

/** Delete the range's rows (lightweight DELETE); for sessions, the rows of the sessions being written again. */
async function clear(client: ClickHouseClient, table: TableSpec, req: ReplayRequest): Promise<void> {
  const where = table.engine === 'replace' ? `session_id IN (${replayedSessions})` : inRange(timeColumn(table));
  await client.command({
    query: `DELETE FROM ${table.name} WHERE tenant = {tenant:String} AND ${where}`,
    query_params: replayParams(req),
    // Wait for the delete to apply before rows are written again.
    clickhouse_settings: { lightweight_deletes_sync: '2' },
  });
}
