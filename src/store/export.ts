import { createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { ClickHouseClient } from '@clickhouse/client';
import { objectUrl, presign, type S3Target } from './s3.js';
import { isEmbedded } from './tsv.js';

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

// Bloom filters off: they cost a fifth of the write time (bench:export), and a warehouse loading the file whole does
// not use them.
const parquetSettings = {
  output_format_parquet_compression_method: 'snappy',
  output_format_parquet_string_as_string: 1,
  output_format_parquet_write_bloom_filter: 0,
} as const;

/**
 * Write the matching events to `path` as Parquet, produced by ClickHouse itself, and count them with the same filter.
 * Snappy compression: every Parquet reader has it, and it is cheap to write. Ordered by `ts`, the table's order within
 * a tenant, so ClickHouse reads in order rather than sorting.
 *
 * The embedded engine writes the file itself: through the client it hands a result over only once whole, so a large
 * export was held and copied in this process before its first byte reached the file (bench:export). A server streams
 * the file to this process, which writes it.
 */
export async function writeParquet(
  client: ClickHouseClient,
  filter: ExportFilter,
  path: string,
): Promise<{ rows: number; bytes: number }> {
  const w = where(filter);
  const select = `SELECT ${columns} FROM events WHERE ${w.sql} ORDER BY ts`;
  if (isEmbedded(client))
    await client.command({
      query: `INSERT INTO FUNCTION file({path:String}, 'Parquet') ${select}`,
      // Absolute: the engine reads a relative path as under its own user_files folder.
      query_params: { ...w.params, path: resolve(path) },
      clickhouse_settings: { ...parquetSettings, engine_file_truncate_on_insert: 1 },
    });
  else {
    const result = await client.exec({
      query: `${select} FORMAT Parquet`,
      query_params: w.params,
      clickhouse_settings: parquetSettings,
    });
    await pipeline(result.stream, createWriteStream(path));
  }
  const counted = await client.query({
    query: `SELECT count() AS n FROM events WHERE ${w.sql}`,
    query_params: w.params,
    format: 'JSONEachRow',
  });
  const [row] = await counted.json<{ n: string }>();
  return { rows: Number(row?.n ?? 0), bytes: (await stat(path)).size };
}

/**
 * The same file, written by ClickHouse straight to an S3-compatible store (`EXPORT_S3_URL`) through the `s3` table
 * function, replacing an object of that key. Rows are counted from the written file's metadata; its size comes from
 * the store (a presigned HEAD), since an empty file has no row to carry ClickHouse's `_size`.
 */
export async function writeParquetS3(
  client: ClickHouseClient,
  filter: ExportFilter,
  target: S3Target,
  key: string,
): Promise<{ rows: number; bytes: number }> {
  const w = where(filter);
  const fn = `s3({s3_url:String}, {s3_key_id:String}, {s3_secret:String}, 'Parquet')`;
  const params = {
    ...w.params,
    s3_url: objectUrl(target, key),
    s3_key_id: target.accessKeyId,
    s3_secret: target.secretAccessKey,
  };
  await client.command({
    query: `INSERT INTO FUNCTION ${fn} SELECT ${columns} FROM events WHERE ${w.sql} ORDER BY ts`,
    query_params: params,
    clickhouse_settings: { ...parquetSettings, s3_truncate_on_insert: 1 },
  });
  const counted = await client.query({
    query: `SELECT count() AS n FROM ${fn}`,
    query_params: params,
    format: 'JSONEachRow',
  });
  const [row] = await counted.json<{ n: string }>();
  const head = await fetch(presign(target, 'HEAD', key, 60), { method: 'HEAD' });
  if (!head.ok) throw new Error(`the export's object is not readable in the store: HEAD answered ${head.status}`);
  return { rows: Number(row?.n ?? 0), bytes: Number(head.headers.get('content-length') ?? 0) };
}
