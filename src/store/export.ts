import { createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import type { ClickHouseClient } from '@clickhouse/client';

/** Which events an export holds: one tenant, `[fromMs, toMs)`, optionally some event types. */
export interface ExportFilter {
  tenant: string;
  fromMs: number;
  toMs: number;
  eventTypes: readonly string[];
}

// Every stored column, in the table's order; docs/export.md lists their
// Parquet types. LowCardinality is dropped so readers see plain strings rather than a dictionary type they may not know.
const columns = `
  toString(tenant) AS tenant, toString(env) AS env, toString(event_type) AS event_type, ts, client_ts, received_at, event_id, anonymous_id, user_id,
  session_id, content_id, toString(content_type) AS content_type, content_title, position_sec, bitrate_kbps,
  toString(country) AS country, toString(region) AS region, toString(device) AS device, toString(app_version) AS app_version,
  toString(os) AS os, toString(browser) AS browser, toString(player) AS player, toString(cdn) AS cdn, toString(pop) AS pop,
  user_agent, properties, ingest_seq, ingest_index`;

function where(filter: ExportFilter): { sql: string; params: Record<string, unknown> } {
  const params: Record<string, unknown> = { tenant: filter.tenant, from: filter.fromMs / 1000, to: filter.toMs / 1000 };
  let sql = `tenant = {tenant:String} AND ts >= toDateTime64({from:Float64}, 3, 'UTC') AND ts < toDateTime64({to:Float64}, 3, 'UTC')`;
  if (filter.eventTypes.length > 0) {
    sql += ' AND event_type IN {types:Array(String)}';
    params.types = filter.eventTypes;
  }
  return { sql, params };
}

/**
 * Write the matching events to `path` as Parquet, produced by ClickHouse itself and streamed to the file, and count
 * them with the same filter. Snappy compression: every Parquet reader has it, and it is cheap to write. Ordered by `ts`,
 * the table's order within a tenant, so ClickHouse reads in order rather than sorting.
 */
export async function writeParquet(client: ClickHouseClient, filter: ExportFilter, path: string): Promise<{ rows: number; bytes: number }> {
  const w = where(filter);
  const result = await client.exec({
    query: `SELECT ${columns} FROM events WHERE ${w.sql} ORDER BY ts FORMAT Parquet`,
    query_params: w.params,
    // Bloom filters off: they cost a fifth of the write time (bench:export), and a warehouse loading the file whole
    // does not use them.
    clickhouse_settings: { output_format_parquet_compression_method: 'snappy', output_format_parquet_string_as_string: 1, output_format_parquet_write_bloom_filter: 0 },
  });
  await pipeline(result.stream, createWriteStream(path));
  const counted = await client.query({ query: `SELECT count() AS n FROM events WHERE ${w.sql}`, query_params: w.params, format: 'JSONEachRow' });
  const [row] = await counted.json<{ n: string }>();
  return { rows: Number(row?.n ?? 0), bytes: (await stat(path)).size };
}
