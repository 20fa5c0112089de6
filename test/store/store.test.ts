import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import type { WireEvent } from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { sessionHours } from '../../pipelines/audience/pipeline.js';
import { Accumulator } from '../../src/aggregate/accumulator.js';
import { eventLine, insertEvents } from '../../src/store/events.js';
import { TsvLines } from '../../src/store/tsv.js';
import { ForeignSchemaError, migrate, migrations } from '../../src/store/migrate.js';
import { insertSnapshotRows } from '../../src/store/snapshots.js';
import { Store } from '../../src/store/store.js';
import { root } from '../helpers/env.js';

// The embedded store (chDB behind @clickhouse/client): migrations, retention, idempotent inserts, and the
// one-process-per-data-directory rule stated clearly. chDB allows one data directory per process, so this file
// uses one.

const log = createLogger('silent');
const dataDir = mkdtempSync(join(tmpdir(), 'darshak-store-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const config = { clickhouse_url: '', data_dir: dataDir, events_retention_days: 30 };

const event = (i: number, extra: Partial<WireEvent> = {}): WireEvent => ({
  tenant: 'acme',
  env: 'production',
  event_type: 'heartbeat',
  ts: Date.UTC(2026, 10, 21, 10, 0, 0, i),
  client_ts: null,
  received_at: Date.UTC(2026, 10, 21, 10, 0, 1),
  session_id: `s${i}`,
  country: 'IN',
  region: 'Maharashtra',
  device: 'tv',
  ...extra,
});

t.test('open applies migrations once, and the configured retention every time', async (t) => {
  let store = await Store.open(config, log);
  t.equal(store.embedded, true);
  t.equal(await store.ping(), true);
  const versions = await (
    await store.client.query({
      query: 'SELECT version, name FROM schema_migrations ORDER BY version',
      format: 'JSONEachRow',
    })
  ).json();
  t.same(
    versions,
    migrations.map((m) => ({ version: m.version, name: m.name })),
  );
  t.match(await showCreate(store), /TTL toDateTime\(ts\) \+ toIntervalDay\(30\)/);
  await store.close();

  store = await Store.open({ ...config, events_retention_days: 90 }, log);
  const again = await (
    await store.client.query({ query: 'SELECT count() AS n FROM schema_migrations', format: 'JSONEachRow' })
  ).json<{ n: number }>();
  t.equal(Number(again[0]?.n), migrations.length, 'nothing applied twice');
  t.match(await showCreate(store), /toIntervalDay\(90\)/, 'a changed retention takes effect at start');
  await store.close();
});

t.test('a store an earlier build made is refused, not upgraded, with what to do (docs/compatibility.md)', async (t) => {
  const store = await Store.open(config, log);
  t.teardown(() => store.close());
  await store.client.insert({
    table: 'schema_migrations',
    values: [{ version: 10, name: 'drop-content-minutes', applied_at: Date.now() }],
    format: 'JSONEachRow',
  });
  const err: unknown = await migrate(store.client, log).catch((e: unknown) => e);
  t.ok(err instanceof ForeignSchemaError, 'refused');
  t.match(
    (err as Error).message,
    /its migration 10 "drop-content-minutes" is not one of this build's\. Before 1\.0 a store is not upgraded: start on an empty one/,
  );
  await store.client.command({
    query: 'ALTER TABLE schema_migrations DELETE WHERE version = 10 SETTINGS mutations_sync = 2',
  });
  t.same(await migrate(store.client, log), [], "this build's own store opens as before");
});

t.test('migrations are frozen text: none imports a pipeline or builds its DDL from a spec', async (t) => {
  const dir = join(root, 'src/store/migrations');
  for (const file of readdirSync(dir)) {
    const imports = [...readFileSync(join(dir, file), 'utf8').matchAll(/^import .* from '([^']+)';$/gm)].map(
      (m) => m[1],
    );
    t.same(imports, ['../migrate.js'], `${file} imports only the Migration type`);
  }
});

t.test('rows keep every field; a batch written twice with its token is stored once', async (t) => {
  const store = await Store.open(config, log);
  t.teardown(() => store.close());
  const first = [
    event(1, {
      event_id: '0b7c6a5e-1d2f-4a3b-9c8d-7e6f5a4b3c2d',
      client_ts: Date.UTC(2026, 10, 21, 9, 0),
      anonymous_id: 'anon',
      user_id: 'u1',
      content_id: 'match-42',
      content_type: 'live',
      content_title: 'IND vs AUS',
      position_sec: 42,
      bitrate_kbps: 4500,
      context: {
        app_version: '3.1',
        os: 'Android',
        browser: 'Chrome',
        player: 'exo',
        cdn: 'akamai',
        pop: 'BOM',
        user_agent: 'UA',
        ip: '49.36.0.1',
      },
      properties: { fatal: false, nested: { a: [1, 'ड'] } },
    }),
    event(2),
  ].map((e, i) => eventLine(e, 77, i));
  await insertEvents(store.client, TsvLines.of(first), 'batch-77');
  await insertEvents(store.client, TsvLines.of(first), 'batch-77');
  await insertEvents(store.client, TsvLines.of([eventLine(event(3), 78, 0)]), 'batch-78');
  const rows = await (
    await store.client.query({
      query: `SELECT *, toUnixTimestamp64Milli(ts) AS ts_ms, toUnixTimestamp64Milli(client_ts) AS client_ms
              FROM events WHERE tenant = {tenant:String} ORDER BY ts`,
      query_params: { tenant: 'acme' },
      format: 'JSONEachRow',
    })
  ).json<Record<string, unknown>>();
  t.equal(rows.length, 3, 'the repeated batch was stored once');
  t.match(rows[0], {
    ts_ms: String(Date.UTC(2026, 10, 21, 10, 0, 0, 1)),
    client_ms: String(Date.UTC(2026, 10, 21, 9, 0)),
    event_id: '0b7c6a5e-1d2f-4a3b-9c8d-7e6f5a4b3c2d',
    content_title: 'IND vs AUS',
    position_sec: 42,
    os: 'Android',
    pop: 'BOM',
    region: 'Maharashtra',
    ingest_seq: '77',
    ingest_index: 0,
  });
  t.same(JSON.parse(String(rows[0]?.properties)), { fatal: false, nested: { a: [1, 'ड'] } });
  t.notOk(JSON.stringify(rows[0]).includes('49.36.0.1'), 'the client address is not kept');
  t.match(rows[1], { client_ts: null, event_id: '', position_sec: null, properties: '{}' });
});

t.test('of the rows a flush puts for one key, the store keeps the last put', async (t) => {
  // The accumulator hands on every row put (Accumulator.puts), at the flush's version but for sessions evicted: the
  // store must keep the later of equal versions, in insert order, however the insert sorts them. Many keys, shuffled,
  // to catch an unstable sort.
  const store = await Store.open(config, log);
  t.teardown(() => store.close());
  const acc = new Accumulator();
  const hour = Date.UTC(2026, 10, 21, 10) / 1000;
  const ids = Array.from({ length: 20_000 }, (_, i) => `put-${(i * 7919) % 20_000}`);
  for (let round = 1; round <= 3; round++) {
    for (const id of ids)
      acc.put(sessionHours, [
        'acme',
        hour,
        id,
        hour * 1000,
        hour * 1000 + round,
        '',
        '',
        '',
        '',
        '',
        '',
        round,
        0,
        null,
        0,
      ]);
  }
  const rows = acc.drain(5).rows.get(sessionHours.name) ?? [];
  t.equal(rows.length, 60_000, 'every put is handed on');
  await insertSnapshotRows(store.client, sessionHours, rows, 'last-put-wins');
  const kept = await (
    await store.client.query({
      query: `SELECT events, count() AS n FROM session_hours FINAL WHERE tenant = 'acme' AND startsWith(session_id, 'put-') GROUP BY events`,
      format: 'JSONEachRow',
    })
  ).json<{ events: string; n: string }>();
  t.same(
    kept.map((r) => [Number(r.events), Number(r.n)]),
    [[3, 20_000]],
  );
});

t.test('a second process on the same data directory is refused with a message that says what to do', async (t) => {
  const store = await Store.open(config, log);
  t.teardown(() => store.close());
  const script = `
    import { Store } from ${JSON.stringify(`${root}dist/src/store/store.js`)};
    import { createLogger } from ${JSON.stringify(`${root}dist/src/log.js`)};
    try { await Store.open(${JSON.stringify(config)}, createLogger('silent')); console.log('opened'); }
    catch (err) { console.log(err.message); }`;
  const out = await new Promise<string>((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.on('close', () => resolve(text));
  });
  t.match(out, /another process is using it .*one process per data directory.*CLICKHOUSE_URL/);
});

async function showCreate(store: Store): Promise<string> {
  const r = await (
    await store.client.query({ query: 'SHOW CREATE TABLE events', format: 'JSONEachRow' })
  ).json<{ statement: string }>();
  return r[0]?.statement ?? '';
}

t.test('a ClickHouse server URL keeps its password out of errors and logs', async (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const err = await Store.open(
    { clickhouse_url: 'http://darshak:s3cret-pass@127.0.0.1:1/', data_dir: dataDir, events_retention_days: 30 },
    createLogger('debug', sink),
  ).then(
    () => null,
    (e: Error) => e,
  );
  t.ok(err, 'nothing answers there');
  t.match(
    err!.message,
    /cannot use ClickHouse at http:\/\/darshak:\*\*\*@127\.0\.0\.1:1\//,
    'the error names the server, the password masked',
  );
  t.notOk(`${err!.message}${lines.join('')}`.includes('s3cret-pass'), 'the password appears nowhere');
});
