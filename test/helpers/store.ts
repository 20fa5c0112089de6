import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type ClickHouseClient } from '@clickhouse/client';

type ClientConnection = NonNullable<NonNullable<Parameters<typeof createClient>[0]>['connection']>;

/** An embedded ClickHouse in a fresh data directory, closed and removed when `t` ends. */
export async function embeddedClient(
  t: { teardown(fn: () => unknown): void },
  name: string,
): Promise<ClickHouseClient> {
  const dataDir = mkdtempSync(join(tmpdir(), `darshak-${name}-`));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const { createChdbConnection } = await import('chdb/connection');
  // chdb types its Connection against another copy of @clickhouse/client-common: the same interface.
  const client = createClient({
    connection: createChdbConnection({ path: join(dataDir, 'clickhouse') }) as unknown as ClientConnection,
  });
  t.teardown(() => client.close());
  return client;
}
