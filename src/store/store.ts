import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { snapshotTables } from '../../pipelines/index.js';
import { migrate } from './migrate.js';
import { ensureSnapshotTables } from './snapshots.js';
import { OperatorError } from '../operator-error.js';
import { registerEmbedded } from './tsv.js';
import { clearOwner, forgetUncommittedTokens, markOwner } from './uncommitted-tokens.js';

type ClientConnection = NonNullable<NonNullable<Parameters<typeof createClient>[0]>['connection']>;

/** A server URL as logs and errors show it: its password masked. */
export function shownUrl(url: string): string {
  if (!URL.canParse(url)) return url;
  const u = new URL(url);
  if (u.password !== '') u.password = '***';
  return u.toString();
}

/** A message that may quote a server URL or its password, with the password masked. */
function masked(message: string, url: string): string {
  const password = URL.canParse(url) ? new URL(url).password : '';
  return password === ''
    ? message
    : message.replaceAll(password, '***').replaceAll(decodeURIComponent(password), '***');
}

export class StoreUnavailableError extends OperatorError {
  override name = 'StoreUnavailableError';
}

/**
 * The one owner of ClickHouse: the `@clickhouse/client` API over embedded chDB (`DATA_DIR/clickhouse`, through
 * chdb's connection hook) or a server at `CLICKHOUSE_URL`. The same SQL runs on both. Opening applies migrations, creates the
 * pipelines' snapshot tables and applies the configured retention.
 */
export class Store {
  private constructor(
    readonly client: ClickHouseClient,
    /** The embedded store's folder, or null for a server. */
    private readonly embeddedPath: string | null,
    private readonly log: Logger,
  ) {}

  get embedded(): boolean {
    return this.embeddedPath !== null;
  }

  static async open(
    config: Pick<Config, 'clickhouse_url' | 'data_dir' | 'events_retention_days'>,
    log: Logger,
  ): Promise<Store> {
    const storeLog = log.child({ module: 'store' });
    const path = config.clickhouse_url === '' ? resolve(config.data_dir, 'clickhouse') : null;
    let client: ClickHouseClient;
    if (path !== null) {
      mkdirSync(path, { recursive: true });
      // Before the engine loads the tables: inserts a kill left half done must be stored when they come again.
      const forgotten = forgetUncommittedTokens(path);
      if (forgotten > 0)
        storeLog.warn(
          { tokens: forgotten },
          'insert tokens whose parts were never committed (the last stop was a crash) forgotten: those inserts are stored when written again',
        );
      // Loaded only when used: roles that never touch the store do not pay for a 500 MB engine.
      const { createChdbConnection } = await import('chdb/connection');
      try {
        // chdb types its Connection against @clickhouse/client-common, which @clickhouse/client now bundles under
        // another path: the same interface, two declarations.
        const chdb = createChdbConnection({ path });
        client = createClient({ connection: chdb as unknown as ClientConnection });
        registerEmbedded(client, chdb.chdb);
        markOwner(path);
      } catch (err) {
        throw new StoreUnavailableError(embeddedOpenError(path, err as Error));
      }
    } else {
      client = createClient({ url: config.clickhouse_url, request_timeout: 30_000 });
    }
    const store = new Store(client, path, storeLog);
    try {
      await migrate(client, storeLog);
      await store.applyRetention(config.events_retention_days);
      await ensureSnapshotTables(client, snapshotTables, config.events_retention_days);
    } catch (err) {
      await client.close().catch(() => undefined);
      if (path !== null) clearOwner(path);
      const message = (err as Error).message;
      throw new StoreUnavailableError(
        path !== null
          ? embeddedOpenError(path, err as Error)
          : `cannot use ClickHouse at ${shownUrl(config.clickhouse_url)}: ${masked(message, config.clickhouse_url)}`,
      );
    }
    storeLog.info(
      {
        embedded: store.embedded,
        target: path !== null ? join(config.data_dir, 'clickhouse') : shownUrl(config.clickhouse_url),
      },
      'store ready',
    );
    return store;
  }

  /** Keep raw events `days` days. Settled at every start so a changed setting takes effect. */
  private async applyRetention(days: number): Promise<void> {
    if (!Number.isSafeInteger(days) || days < 1)
      throw new Error(`retention must be a positive whole number of days, got ${days}`);
    await this.client.command({ query: `ALTER TABLE events MODIFY TTL toDateTime(ts) + INTERVAL ${days} DAY` });
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.client.ping()).success;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.client.close();
    if (this.embeddedPath !== null) clearOwner(this.embeddedPath);
    this.log.debug('store closed');
  }
}

function embeddedOpenError(path: string, err: Error): string {
  const detail = err.message.split('\n')[0];
  // chdb reports a held lock ("Cannot lock file .../status") on stderr and only "Failed to create connection" to us.
  if (/lock|only one active data directory|failed to create connection/i.test(err.message)) {
    return `cannot open embedded ClickHouse at ${path}; most likely another process is using it (embedded ClickHouse admits one process per data directory): run the roles that use the store (flush, api) in one process, give each process its own DATA_DIR, or set CLICKHOUSE_URL to a ClickHouse server. (${detail})`;
  }
  return `cannot open embedded ClickHouse at ${path}: ${detail}`;
}
