import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { Store } from '../../src/store/store.js';
import {
  drained,
  eventually,
  freePort,
  makeTenant,
  post,
  ready,
  removeNamespace,
  RoleProcesses,
  startService,
  uniquePrefix,
} from '../helpers/env.js';

// Ingest → JetStream → aggregate (dedup) → raw stream → flush → ClickHouse `events`: every accepted event is
// stored once; an event_id sent again within 24 h is stored once; nothing is lost or doubled when an aggregator or
// the flusher is killed with -9 mid-stream and started again.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-raw-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

async function storedIds(store: Store, tenant: string): Promise<string[]> {
  const rows = await (
    await store.client.query({
      query: 'SELECT event_id FROM events WHERE tenant = {tenant:String}',
      query_params: { tenant },
      format: 'JSONEachRow',
    })
  ).json<{ event_id: string }>();
  return rows.map((r) => r.event_id);
}

async function storedCount(store: Store, tenant: string): Promise<number> {
  const rows = await (
    await store.client.query({
      query: 'SELECT count() AS n FROM events WHERE tenant = {tenant:String}',
      query_params: { tenant },
      format: 'JSONEachRow',
    })
  ).json<{ n: string }>();
  return Number(rows[0]?.n ?? 0);
}

t.test('all roles in one process: accepted events land in ClickHouse once each', async (t) => {
  const svc = await startService({ data_dir: dataDir }, 'all');
  t.teardown(() => svc.stop());
  const tenant = await makeTenant(svc.config.nats_prefix, 'rawpath');
  const url = `${svc.ingestUrl}/v1/ingest/events`;
  const auth = { 'x-api-key': tenant.key };
  const ids = Array.from({ length: 300 }, () => randomUUID());
  // A retry resends the same event (same session, so the same shard and aggregator).
  const batch = (slice: string[]) => ({
    events: slice.map((id) => ({ event_type: 'heartbeat', event_id: id, session_id: `s-${id.slice(0, 2)}` })),
  });
  t.equal((await post(url, batch(ids.slice(0, 200)), auth)).body.accepted, 200);
  // Retries of half of them (accepted again, as the contract says) and 100 new ones.
  t.equal((await post(url, batch(ids.slice(100, 300)), auth)).body.accepted, 200);
  // Events without event_id are never de-duplicated.
  const plain = { events: Array.from({ length: 50 }, () => ({ event_type: 'pause', session_id: 'same' })) };
  t.equal((await post(url, plain, auth)).body.accepted, 50);
  t.equal((await post(url, plain, auth)).body.accepted, 50);

  const store = svc.started.services.get('store');
  t.not(
    await eventually(async () => (await storedCount(store, 'rawpath')) >= 400, 10_000, 100),
    -1,
    'stored within 10 s',
  );
  await new Promise((r) => setTimeout(r, 1500));
  const stored = await storedIds(store, 'rawpath');
  t.equal(stored.length, 400, '300 distinct event_ids + 100 without');
  t.same([...new Set(stored.filter((id) => id !== ''))].sort(), [...ids].sort(), 'each event_id exactly once');
  t.equal(stored.filter((id) => id === '').length, 100);
});

t.test('kill -9 of the aggregator and of the flusher mid-stream: nothing lost, nothing doubled', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const tenant = await makeTenant(prefix, 'crashy', 'enterprise');
  const ingestPort = await freePort();
  const procs = new RoleProcesses({ NATS_PREFIX: prefix }, t);
  t.teardown(() => procs.stopAll());
  const role = (args: string[], extra: Record<string, string> = {}) => procs.start(args, extra);
  const ingestDir = mkdtempSync(join(tmpdir(), 'darshak-ing-'));
  const flushDir = mkdtempSync(join(tmpdir(), 'darshak-fl-'));
  t.teardown(() => [ingestDir, flushDir].forEach((d) => rmSync(d, { recursive: true, force: true })));
  role(['--role', 'ingest'], { INGEST_PORT: String(ingestPort), DATA_DIR: ingestDir });
  let aggregator = role(['--role', 'aggregate']);
  let flusher = role(['--role', 'flush'], { DATA_DIR: flushDir });
  const url = `http://127.0.0.1:${ingestPort}/v1/ingest/events`;
  t.ok(await ready(`http://127.0.0.1:${ingestPort}`));

  const accepted = new Set<string>();
  let running = true;
  const sender = async (): Promise<void> => {
    while (running) {
      const ids = Array.from({ length: 25 }, () => randomUUID());
      // Every event is sent twice (a retrying SDK): the second copy must never be stored.
      const body = {
        events: [...ids, ...ids].map((id) => ({ event_type: 'heartbeat', event_id: id, session_id: id.slice(0, 6) })),
      };
      const r = await post(url, body, { 'x-api-key': tenant.key }).catch(() => null);
      if (r?.status === 200) ids.forEach((id) => accepted.add(id));
    }
  };
  const senders = Array.from({ length: 4 }, () => sender());
  const restart = async (which: 'aggregate' | 'flush'): Promise<void> => {
    await new Promise((r) => setTimeout(r, 1200));
    await procs.stop(which === 'aggregate' ? aggregator : flusher);
    await new Promise((r) => setTimeout(r, 500));
    if (which === 'aggregate') aggregator = role(['--role', 'aggregate']);
    else flusher = role(['--role', 'flush'], { DATA_DIR: flushDir });
  };
  await restart('aggregate');
  await restart('flush');
  await restart('aggregate');
  await new Promise((r) => setTimeout(r, 1000));
  running = false;
  await Promise.all(senders);
  t.ok(accepted.size > 1000, `load was real: ${accepted.size} distinct events accepted`);

  // Wait until the aggregators have passed on every input and the flusher has written it all, then read ClickHouse
  // once the flusher has let go of its directory.
  t.not(await eventually(() => drained(prefix), 60_000, 500), -1, 'the pipeline drains');
  await procs.stop(flusher, 'SIGTERM');
  const store = await Store.open(
    { clickhouse_url: '', data_dir: flushDir, events_retention_days: 30 },
    createLogger('silent'),
  );
  const stored = await storedIds(store, 'crashy');
  await store.close();
  const unique = new Set(stored);
  t.equal(unique.size, stored.length, 'no event stored twice');
  const missing = [...accepted].filter((id) => !unique.has(id));
  t.same(
    missing.slice(0, 5),
    [],
    `no accepted event missing (${missing.length} of ${accepted.size} missing, ${stored.length} stored)`,
  );
});
