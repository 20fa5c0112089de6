import type { ClickHouseClient } from '@clickhouse/client';
import { snapshotTables } from '../../pipelines/index.js';
import type { Cell, ColumnType, TableSpec } from '../metric/pipeline.js';
import { insertTsv, TsvLines, tsvRow } from './tsv.js';

// The pipelines' snapshot tables. Each pipeline file declares its tables (pipelines/*.ts); they are created here at
// every start (IF NOT EXISTS), so adding a pipeline adds its tables. A changed definition is a new table name and a
// `darshak replay`, never an edit of a table in use.

const sqlType = (t: ColumnType): string =>
  t === 'DateTime' ? "DateTime('UTC')" : t === 'DateTime64(3)' ? "DateTime64(3, 'UTC')" : t;

/** The column of a table that partitions it and bounds its retention. */
export function timeColumn(table: TableSpec): string {
  return table.engine === 'replace' ? 'last_ts' : 'ts';
}

/** Which of a row's cells are DateTime64(3), given in Unix milliseconds (a `map` table has none). */
function msColumns(table: TableSpec): boolean[] {
  if (table.map) return sortKey(table).map(([, type]) => type === 'DateTime64(3)');
  return [...table.key, ...table.values].map(([, type]) => type === 'DateTime64(3)');
}

/** The key columns a table is ordered by: for a `map` table, all but the last, which keys its map. */
const sortKey = (table: TableSpec): TableSpec['key'] => (table.map ? table.key.slice(0, -1) : table.key);

/** The columns of a row as the runtime emits it (metric/pipeline.ts), by their names in the table. */
export function rowColumns(table: TableSpec): string[] {
  const { map } = table;
  if (!map) return [...table.key, ...table.values].map(([name]) => name);
  return [
    ...sortKey(table).map(([name]) => name),
    ...[table.key[table.key.length - 1]!, ...table.values].map(([name]) => `${map}.${name}`),
  ];
}

export function createTableSql(table: TableSpec): string {
  const { map } = table;
  const typed = (cs: TableSpec['key']): string[] => cs.map(([name, type]) => `${name} ${sqlType(type)}`);
  const columns = [
    ...(map
      ? [
          ...typed(sortKey(table)),
          `${map} Nested(${typed([table.key[table.key.length - 1]!, ...table.values]).join(', ')})`,
        ]
      : typed([...table.key, ...table.values])),
    ...(table.derived ?? []).map(([name, type, expression]) => `${name} ${type} MATERIALIZED ${expression}`),
    ...(table.projections ?? []).map(([name, select]) => `PROJECTION ${name} (${select})`),
  ].join(', ');
  // A `sum` table would add its derived columns up when merging rows: they are functions of the key columns, so they
  // join the sort key without changing which rows merge.
  const derivedKey = table.engine === 'sum' ? (table.derived ?? []).map(([name]) => name) : [];
  const orderBy = [...sortKey(table).map(([name]) => name), ...derivedKey].join(', ');
  const engine =
    table.engine === 'sum'
      ? 'SummingMergeTree PARTITION BY toYYYYMM(ts)'
      : table.engine === 'replace'
        ? // Replacing works within a partition: partitioned only where a row's partition can never change.
          `ReplacingMergeTree(version)${table.partitionBy ? ` PARTITION BY ${table.partitionBy}` : ''}`
        : 'MergeTree PARTITION BY toYYYYMM(ts)';
  // `non_replicated_deduplication_window` makes insert_deduplication_token work: a redelivered flush stores nothing.
  const settings = [
    'non_replicated_deduplication_window = 100000',
    ...(table.projections?.length ? projectionSettings : []),
  ];
  return `CREATE TABLE IF NOT EXISTS ${table.name} (${columns}) ENGINE = ${engine} ORDER BY (${orderBy}) SETTINGS ${settings.join(', ')}`;
}

// Without these ClickHouse refuses projections on summing and replacing tables, and replay's DELETE on any table
// that has one: merges and deletes rebuild the projections instead.
const projectionSettings = [
  "deduplicate_merge_projection_mode = 'rebuild'",
  "lightweight_mutation_projection_mode = 'rebuild'",
];

/**
 * Give an existing table the projections its spec declares and it lacks, built for the rows it already holds: so a
 * projection added to a pipeline's table applies to stores created before it, at their next start.
 */
async function ensureProjections(client: ClickHouseClient, table: TableSpec): Promise<void> {
  if (!table.projections?.length) return;
  const result = await client.query({
    query: 'SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = {name:String}',
    query_params: { name: table.name },
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ create_table_query: string }>();
  const missing = table.projections.filter(([name]) => !row?.create_table_query.includes(`PROJECTION ${name} (`));
  if (missing.length === 0) return;
  await client.command({ query: `ALTER TABLE ${table.name} MODIFY SETTING ${projectionSettings.join(', ')}` });
  for (const [name, select] of missing) {
    await client.command({ query: `ALTER TABLE ${table.name} ADD PROJECTION IF NOT EXISTS ${name} (${select})` });
    await client.command({
      query: `ALTER TABLE ${table.name} MATERIALIZE PROJECTION ${name}`,
      clickhouse_settings: { mutations_sync: '2' },
    });
  }
}

export async function ensureSnapshotTables(
  client: ClickHouseClient,
  tables: readonly TableSpec[],
  retentionDays: number,
): Promise<void> {
  for (const table of tables) {
    await client.command({ query: createTableSql(table) });
    await ensureProjections(client, table);
    await client.command({
      query: `ALTER TABLE ${table.name} MODIFY TTL toDateTime(${timeColumn(table)}) + INTERVAL ${retentionDays + (table.spanDays ?? 0)} DAY`,
    });
  }
}

/**
 * One idempotent insert of a flush's rows for one table (rows in the table's column order), then the refresh of the
 * tables derived from it for the keys the rows hold (`TableSpec.derivedFrom`): every writer (the flusher, replay)
 * keeps them in step, and a redelivered flush, stored once, refreshes again to the same rows.
 */
export async function insertSnapshotRows(
  client: ClickHouseClient,
  table: TableSpec,
  rows: readonly (readonly Cell[])[],
  token: string,
): Promise<void> {
  if (rows.length === 0) return;
  const columns = rowColumns(table);
  const ms = msColumns(table);
  const body = new TsvLines();
  for (const row of rows) body.push(tsvRow(row, ms));
  await insertTsv(client, table.name, columns, body, token);
  const tenantAt = columns.indexOf('tenant');
  for (const derived of derivedTables(table)) {
    const at = columns.indexOf(derived.derivedFrom!.by);
    const keys = new Map<string, Set<string>>();
    for (const row of rows) {
      const tenant = String(row[tenantAt]);
      const set = keys.get(tenant) ?? new Set<string>();
      set.add(String(row[at]));
      keys.set(tenant, set);
    }
    for (const [tenant, set] of keys) await refreshDerived(client, derived, tenant, set);
  }
}

/** The tables derived from `source`. */
export const derivedTables = (source: TableSpec): TableSpec[] =>
  snapshotTables.filter((t) => t.derivedFrom?.table === source.name);

/** Keys per refresh statement: they travel as one parameter, in the URL of a ClickHouse server's request. */
const refreshChunk = 1000;

/** Recompute a derived table's rows of a tenant's `keys` from its source (`TableSpec.derivedFrom`). */
export async function refreshDerived(
  client: ClickHouseClient,
  derived: TableSpec,
  tenant: string,
  keys: Iterable<string>,
): Promise<void> {
  const all = [...keys];
  for (let i = 0; i < all.length; i += refreshChunk) {
    await client.command({
      query: derived.derivedFrom!.refresh,
      query_params: { tenant, keys: all.slice(i, i + refreshChunk) },
    });
  }
}
