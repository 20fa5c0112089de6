import type { ClickHouseClient } from '@clickhouse/client';
import type { Logger } from '../log.js';
import { migration as events } from './migrations/0001-events.js';
import { migration as alerts } from './migrations/0002-alerts.js';
import { migration as sessionHours } from './migrations/0003-session-hours.js';
import { migration as viewerWindows } from './migrations/0004-viewer-windows.js';
import { migration as completionMinutes } from './migrations/0005-completion-minutes.js';
import { migration as billingKeys } from './migrations/0006-billing-keys.js';
import { migration as sessionIndex } from './migrations/0007-events-session-index.js';
import { migration as subscriptionUsers } from './migrations/0008-subscription-users.js';
import { migration as contentMinuteSums } from './migrations/0009-content-minute-sums.js';
import { migration as dropContentMinutes } from './migrations/0010-drop-content-minutes.js';

export interface Migration {
  version: number;
  name: string;
  /** Each statement must be safe to run again (IF NOT EXISTS): a crash between two leaves a half-applied step. */
  statements: string[];
}

/** In order; a new migration is a new file in migrations/ and one line here. Never edit an applied one. */
export const migrations: readonly Migration[] = [events, alerts, sessionHours, viewerWindows, completionMinutes, billingKeys, sessionIndex, subscriptionUsers, contentMinuteSums, dropContentMinutes];

/** Apply what `schema_migrations` does not list yet; answers the versions applied now. */
export async function migrate(client: ClickHouseClient, log: Logger, list: readonly Migration[] = migrations): Promise<number[]> {
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS schema_migrations (
      version UInt32, name String, applied_at DateTime64(3, 'UTC')
    ) ENGINE = MergeTree ORDER BY version`,
  });
  const rows = await (await client.query({ query: 'SELECT DISTINCT version FROM schema_migrations', format: 'JSONEachRow' })).json<{ version: number }>();
  const done = new Set(rows.map((r) => Number(r.version)));
  const applied: number[] = [];
  for (const m of [...list].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue;
    for (const statement of m.statements) await client.command({ query: statement });
    // No de-duplication token here: settings stick to an embedded ClickHouse session, and a token set at open would
    // silently drop the next tokenless insert of whoever opened the store (schema_migrations does not de-duplicate).
    await client.insert({ table: 'schema_migrations', values: [{ version: m.version, name: m.name, applied_at: Date.now() }], format: 'JSONEachRow' });
    log.info({ version: m.version, name: m.name }, 'migration applied');
    applied.push(m.version);
  }
  return applied;
}
