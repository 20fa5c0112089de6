import type { ClickHouseClient } from '@clickhouse/client';
import type { Cell, ColumnType, TableSpec } from '../aggregate/pipeline.js';

// The pipelines' snapshot tables. Each pipeline file declares its tables (pipelines/*.ts); they are created here at
// every start (IF NOT EXISTS), so adding a pipeline adds its tables. A changed definition is a new table name and a
// `darshak replay`, never an edit of a table in use.

const sqlType = (t: ColumnType): string => (t === 'DateTime' ? "DateTime('UTC')" : t === 'DateTime64(3)' ? "DateTime64(3, 'UTC')" : t);

/** The column of a table that partitions it and bounds its retention. */
export function timeColumn(table: TableSpec): string {
  return table.engine === 'replace' ? 'last_ts' : 'ts';
}

export function createTableSql(table: TableSpec): string {
  const columns = [
    ...[...table.key, ...table.values].map(([name, type]) => `${name} ${sqlType(type)}`),
    ...(table.derived ?? []).map(([name, type, expression]) => `${name} ${type} MATERIALIZED ${expression}`),
  ].join(', ');
  const orderBy = table.key.map(([name]) => name).join(', ');
  const engine =
    table.engine === 'sum'
      ? 'SummingMergeTree PARTITION BY toYYYYMM(ts)'
      : table.engine === 'replace'
        ? // Replacing works within a partition: partitioned only where a row's partition can never change.
          `ReplacingMergeTree(version)${table.partitionBy ? ` PARTITION BY ${table.partitionBy}` : ''}`
        : 'MergeTree PARTITION BY toYYYYMM(ts)';
  // `non_replicated_deduplication_window` makes insert_deduplication_token work: a redelivered flush stores nothing.
  return `CREATE TABLE IF NOT EXISTS ${table.name} (${columns}) ENGINE = ${engine} ORDER BY (${orderBy}) SETTINGS non_replicated_deduplication_window = 100000`;
}

export async function ensureSnapshotTables(client: ClickHouseClient, tables: readonly TableSpec[], retentionDays: number): Promise<void> {
  for (const table of tables) {
    await client.command({ query: createTableSql(table) });
    await client.command({ query: `ALTER TABLE ${table.name} MODIFY TTL toDateTime(${timeColumn(table)}) + INTERVAL ${retentionDays} DAY` });
  }
}

/** One idempotent insert of a flush's rows for one table (rows in the table's column order). */
export async function insertSnapshotRows(client: ClickHouseClient, table: TableSpec, rows: readonly (readonly Cell[])[], token: string): Promise<void> {
  if (rows.length === 0) return;
  await client.insert({
    table: table.name,
    values: rows as Cell[][],
    columns: [...table.key, ...table.values].map(([name]) => name) as [string, ...string[]],
    format: 'JSONCompactEachRow',
    clickhouse_settings: { insert_deduplication_token: token },
  });
}
