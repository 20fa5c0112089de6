import type { ClickHouseClient } from '@clickhouse/client';
import type { Logger } from '../log.js';
import { migration as initial } from './migrations/0001-initial.js';

export interface Migration {
  version: number;
  name: string;
  /** Each statement must be safe to run again (IF NOT EXISTS): a crash between two leaves a half-applied step. */
  statements: string[];
}

/**
 * In order; a new migration is a new file in migrations/ and one line here, its DDL written out (never built from a
 * pipeline's spec, which changes after it). Never edit one that a release has applied (docs/compatibility.md).
 */
export const migrations: readonly Migration[] = [initial];

/** A store whose `schema_migrations` lists a step this build does not have: an earlier build's (docs/compatibility.md). */
export class ForeignSchemaError extends Error {
  constructor(version: number, name: string) {
    super(
      `this store was made by another build: its migration ${version} "${name}" is not one of this build's. Before 1.0 a store is not upgraded: start on an empty one (a new DATA_DIR, or a new ClickHouse database), and see docs/compatibility.md`,
    );
  }
}

/** Apply what `schema_migrations` does not list yet; answers the versions applied now. */
export async function migrate(
  client: ClickHouseClient,
  log: Logger,
  list: readonly Migration[] = migrations,
): Promise<number[]> {
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS schema_migrations (
      version UInt32, name String, applied_at DateTime64(3, 'UTC')
    ) ENGINE = MergeTree ORDER BY version`,
  });
  const rows = await (
    await client.query({ query: 'SELECT DISTINCT version, name FROM schema_migrations', format: 'JSONEachRow' })
  ).json<{ version: number; name: string }>();
  for (const r of rows)
    if (!list.some((m) => m.version === Number(r.version) && m.name === r.name))
      throw new ForeignSchemaError(Number(r.version), r.name);
  const done = new Set(rows.map((r) => Number(r.version)));
  const applied: number[] = [];
  for (const m of [...list].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue;
    for (const statement of m.statements) await client.command({ query: statement });
    // No de-duplication token here: settings stick to an embedded ClickHouse session, and a token set at open would
    // silently drop the next tokenless insert of whoever opened the store (schema_migrations does not de-duplicate).
    await client.insert({
      table: 'schema_migrations',
      values: [{ version: m.version, name: m.name, applied_at: Date.now() }],
      format: 'JSONEachRow',
    });
    log.info({ version: m.version, name: m.name }, 'migration applied');
    applied.push(m.version);
  }
  return applied;
}
