import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import t from 'tap';
import { ExportService, fileLifetimeMs, jobTimeoutMs } from '../../src/api/exports.js';
import { busNames } from '../../src/bus/names.js';
import { createLogger } from '../../src/log.js';
import { call, login } from '../helpers/api.js';
import { sendScenario } from '../helpers/compare.js';
import { cli, drained, eventually, freePort, makeTenant, natsUrl, startService } from '../helpers/env.js';
import { makeScenario } from '../helpers/scenario.js';
import { checksum, columns, downloadParquet, line, rowLine } from '../helpers/parquet.js';

// Raw event export to Parquet over HTTP: the file read back with an independent reader (hyparquet) and compared
// with the scenario's de-duplicated events; plan gating, tenancy, signed links, the pending limit.

const DAY = 86_400_000;
const dataDir = mkdtempSync(join(tmpdir(), 'darshak-api-export-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

const port = await freePort();
const publicBaseUrl = `http://127.0.0.1:${port}`;
const svc = await startService({ data_dir: dataDir, base_port: port, public_base_url: publicBaseUrl }, 'all');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
const prefix = svc.config.nats_prefix;
const alpha = await makeTenant(prefix, 'alpha', 'enterprise');
await makeTenant(prefix, 'bravo', 'enterprise');
await makeTenant(prefix, 'gamma', 'enterprise');
await makeTenant(prefix, 'plain', 'pro');
const now = Date.now();
const scenario = makeScenario({ seed: 23, tenants: ['alpha'], now, sessionsPerTenant: 20 });
await sendScenario(svc.ingestUrl, scenario, { alpha: alpha.key });
if ((await eventually(() => drained(prefix, svc.config.shards), 30_000, 200)) === -1)
  throw new Error('pipeline did not drain');
const token = await login(base, 'owner@alpha.test');

const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
const to = day(now);
const from = day(now - 30 * DAY);

async function finished(id: string, who = token): Promise<Record<string, unknown>> {
  let last: Record<string, unknown> = {};
  const done = await eventually(
    async () => {
      const r = await call(base, 'GET', `/v1/analytics/export/${id}`, { token: who });
      last = r.json;
      return r.status === 200 && last.status !== 'pending';
    },
    60_000,
    100,
  );
  if (done === -1) throw new Error(`export ${id} still pending: ${JSON.stringify(last)}`);
  return last;
}

const download = (url: string) => downloadParquet(url, dataDir);

t.test('an export holds the de-duplicated events of the range, read back with another Parquet reader', async (t) => {
  const created = await call(base, 'POST', '/v1/analytics/export', { token, body: { from, to } });
  t.equal(created.status, 202);
  t.match(created.json, { export_id: /^exp_[0-9a-f]{20}$/, status: 'pending' });
  const done = await finished(String(created.json.export_id));
  t.equal(done.status, 'ready', JSON.stringify(done));
  const url = String(done.url);
  t.ok(
    url.startsWith(`${publicBaseUrl}/v1/exports/${String(created.json.export_id)}/file?expires=`),
    'a link on PUBLIC_BASE_URL',
  );
  const { res, rows, names } = await download(url);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'application/vnd.apache.parquet');
  t.equal(res.headers.get('content-disposition'), `attachment; filename="alpha-${from}-${to}.parquet"`);
  t.equal(res.headers.get('content-length'), String(done.bytes));
  t.strictSame(names, columns);
  const fromMs = Date.parse(`${from}T00:00:00Z`);
  const expected = scenario.expected.filter(
    (e) => e.tenant === 'alpha' && e.ts >= fromMs && e.ts < Date.parse(`${to}T00:00:00Z`) + DAY,
  );
  t.ok(expected.length > 100, `${expected.length} events in range`);
  t.ok(scenario.expected.length > expected.length, 'and some before it, left out');
  t.equal(rows.length, expected.length, 'duplicates sent twice appear once');
  t.equal(done.rows, expected.length);
  t.equal(checksum(rows.map(rowLine)), checksum(expected.map(line)), 'the same values');
  t.ok(
    rows.every((r, i) => i === 0 || (r.ts as Date).getTime() >= (rows[i - 1]!.ts as Date).getTime()),
    'ordered by ts',
  );
  t.equal(typeof rows[0]?.ingest_seq, 'bigint', 'UInt64 as a 64-bit integer');

  const types = ['play', 'heartbeat'];
  const filtered = await call(base, 'POST', '/v1/analytics/export', { token, body: { from, to, event_types: types } });
  const fdone = await finished(String(filtered.json.export_id));
  const f = await download(String(fdone.url));
  const fexpected = expected.filter((e) => types.includes(e.event_type));
  t.ok(fexpected.length > 0);
  t.equal(f.rows.length, fexpected.length, 'event_types filter');
  t.equal(checksum(f.rows.map(rowLine)), checksum(fexpected.map(line)));
});

t.test('an empty range is ready with 0 rows and a readable file', async (t) => {
  const created = await call(base, 'POST', '/v1/analytics/export', {
    token,
    body: { from: '2020-01-01', to: '2020-01-31' },
  });
  t.equal(created.status, 202);
  const done = await finished(String(created.json.export_id));
  t.match(done, { status: 'ready', rows: 0 });
  const { rows, names } = await download(String(done.url));
  t.equal(rows.length, 0);
  t.strictSame(names, columns);
});

t.test('two concurrent exports both finish with the same rows', async (t) => {
  const [a, b] = await Promise.all(
    [0, 1].map(() => call(base, 'POST', '/v1/analytics/export', { token, body: { from, to } })),
  );
  t.equal(a!.status, 202);
  t.equal(b!.status, 202);
  t.not(a!.json.export_id, b!.json.export_id);
  const [da, db] = await Promise.all([finished(String(a!.json.export_id)), finished(String(b!.json.export_id))]);
  t.match(da, { status: 'ready' });
  t.equal(da.rows, db.rows);
});

t.test('a third pending export of a tenant is 429 too_many_exports', async (t) => {
  // Two pending exports as another api process would hold them, so the limit is tested without racing a job.
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const kv = await nc.jetstream().views.kv(busNames(prefix).exportsBucket);
  for (const n of [0, 1]) {
    const id = `exp_${'0'.repeat(19)}${n}`;
    const record = {
      export_id: id,
      tenant: 'gamma',
      status: 'pending',
      from,
      to,
      event_types: [],
      rows: null,
      bytes: null,
      created_at: new Date().toISOString(),
      finished_at: null,
      error: null,
      expires_at: null,
    };
    await kv.put(id, JSON.stringify(record));
  }
  const gamma = await login(base, 'owner@gamma.test');
  const r = await call(base, 'POST', '/v1/analytics/export', { token: gamma, body: { from, to } });
  t.equal(r.status, 429);
  t.match(r.json, { error: { code: 'too_many_exports' } });
  t.equal(r.headers.get('retry-after'), '30');
  t.equal(
    (await call(base, 'POST', '/v1/analytics/export', { token, body: { from, to } })).status,
    202,
    'other tenants are not held up',
  );
});

t.test('plan gating, viewers, tenancy', async (t) => {
  const plain = await login(base, 'owner@plain.test');
  const refused = await call(base, 'POST', '/v1/analytics/export', { token: plain, body: { from, to } });
  t.equal(refused.status, 403);
  t.match(refused.json, { error: { code: 'plan_required' } });
  const added = await cli(
    [
      'user',
      'add',
      '--tenant',
      'alpha',
      '--email',
      'v@alpha.test',
      '--password',
      'correct horse battery',
      '--role',
      'viewer',
    ],
    { NATS_PREFIX: prefix },
  );
  t.equal(added.code, 0);
  const viewer = await login(base, 'v@alpha.test');
  const mine = await call(base, 'POST', '/v1/analytics/export', { token: viewer, body: { from: to, to } });
  t.equal(mine.status, 202, 'a viewer may export');
  const id = String(mine.json.export_id);
  t.equal((await finished(id, viewer)).status, 'ready');
  const bravo = await login(base, 'owner@bravo.test');
  const other = await call(base, 'GET', `/v1/analytics/export/${id}`, { token: bravo });
  t.equal(other.status, 404, "another tenant's export does not exist for bravo");
  t.equal((await call(base, 'GET', '/v1/analytics/export/exp_00000000000000000000', { token })).status, 404);
  t.equal((await call(base, 'GET', '/v1/analytics/export/../../etc', { token })).status, 404);
  t.equal((await call(base, 'POST', '/v1/analytics/export', { body: { from, to } })).status, 401);
});

t.test('bad bodies are 400 invalid_request naming the field', async (t) => {
  const cases: Array<[unknown, string]> = [
    [{ from: '2026-01-01', to: '2026-02-01' }, 'to'],
    [{ from: '2026-01-02', to: '2026-01-01' }, 'to'],
    [{ from: '2026-02-30', to: '2026-03-01' }, 'from'],
    [{ from: '2026-1-1', to: '2026-01-02' }, 'from'],
    [{ from: '2026-01-01T00:00:00Z', to: '2026-01-02' }, 'from'],
    [{ from: '2026-01-01' }, 'to'],
    [{ from: '2026-01-01', to: '2026-01-02', event_types: 'play' }, 'event_types'],
    [{ from: '2026-01-01', to: '2026-01-02', event_types: [''] }, 'event_types'],
    [{ from: '2026-01-01', to: '2026-01-02', tenant: 'bravo' }, 'tenant'],
  ];
  for (const [body, field] of cases) {
    const r = await call(base, 'POST', '/v1/analytics/export', { token, body });
    t.equal(r.status, 400, JSON.stringify(body));
    t.match(r.json, { error: { code: 'invalid_request', details: [{ field }] } }, JSON.stringify(body));
  }
  t.equal(
    (await call(base, 'POST', '/v1/analytics/export', { token, body: { from: '2026-01-01', to: '2026-01-31' } }))
      .status,
    202,
    '31 days, both included, is allowed',
  );
});

t.test('tampered and expired links are 403 invalid_signature', async (t) => {
  const created = await call(base, 'POST', '/v1/analytics/export', { token, body: { from: to, to } });
  const done = await finished(String(created.json.export_id));
  const url = new URL(String(done.url));
  const id = String(created.json.export_id);
  const path = `/v1/exports/${id}/file`;
  const expires = url.searchParams.get('expires')!;
  const signature = url.searchParams.get('signature')!;
  t.equal((await fetch(`${base}${path}${url.search}`)).status, 200, 'the link as given works');
  t.ok(
    Number(expires) * 1000 - Date.now() > 3_500_000 && Number(expires) * 1000 - Date.now() <= 3_600_000,
    'valid one hour',
  );
  const flipped = `${signature.slice(0, -1)}${signature.endsWith('0') ? '1' : '0'}`;
  const nc = await connect({ servers: natsUrl });
  const secret = await (await nc.jetstream().views.kv(busNames(prefix).exportSecretBucket)).get('secret');
  await nc.close();
  const past = Math.floor(Date.now() / 1000) - 1;
  const signedPast = createHmac('sha256', Buffer.from(secret!.value)).update(`${id}.${past}`).digest('hex');
  const cases = [
    `?expires=${expires}&signature=${flipped}`,
    `?expires=${Number(expires) + 3600}&signature=${signature}`,
    `?expires=${past}&signature=${signedPast}`,
    `?expires=${expires}`,
    '',
  ];
  for (const q of cases) {
    const r = await call(base, 'GET', `${path}${q}`);
    t.equal(r.status, 403, q);
    t.match(r.json, { error: { code: 'invalid_signature' } }, q);
  }
  const other = await call(base, 'GET', `/v1/exports/exp_00000000000000000000/file${url.search}`);
  t.equal(other.status, 403, "one export's signature opens no other");
  t.equal(secret!.value.length, 32, 'a 32-byte secret');
});

t.test('an api start marks stale pending exports interrupted and deletes files older than 24 h', async (t) => {
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const kv = await nc.jetstream().views.kv(busNames(prefix).exportsBucket);
  const record = (id: string, ageMs: number) => ({
    export_id: id,
    tenant: 'bravo',
    status: 'pending',
    from,
    to,
    event_types: [],
    rows: null,
    bytes: null,
    created_at: new Date(Date.now() - ageMs).toISOString(),
    finished_at: null,
    error: null,
    expires_at: null,
  });
  const stale = 'exp_aaaaaaaaaaaaaaaaaaaa';
  const fresh = 'exp_bbbbbbbbbbbbbbbbbbbb';
  await kv.put(stale, JSON.stringify(record(stale, jobTimeoutMs + 60_000)));
  await kv.put(fresh, JSON.stringify(record(fresh, 1000)));
  const otherDir = mkdtempSync(join(tmpdir(), 'darshak-export-sweep-'));
  t.teardown(() => rmSync(otherDir, { recursive: true, force: true }));
  mkdirSync(join(otherDir, 'exports'));
  const old = join(otherDir, 'exports', 'exp_cccccccccccccccccccc.parquet');
  const young = join(otherDir, 'exports', 'exp_dddddddddddddddddddd.parquet');
  writeFileSync(old, 'x');
  writeFileSync(young, 'x');
  const then = (Date.now() - fileLifetimeMs - 60_000) / 1000;
  utimesSync(old, then, then);
  const services = svc.started.services;
  const second = await ExportService.open(
    services.get('bus'),
    services.get('store').client,
    otherDir,
    '',
    createLogger('silent'),
  );
  second.start();
  t.teardown(() => second.stop());
  t.match(await second.get(stale), { status: 'failed', error: 'interrupted' });
  t.match(await second.get(fresh), { status: 'pending', error: null }, 'a recent one may still be running elsewhere');
  t.not(await eventually(async () => !existsSync(old), 5000), -1, 'the old file is deleted');
  t.ok(existsSync(young), 'a younger one is kept');
});

t.test('past its 24 hours a ready export has no link, and its old link finds nothing', async (t) => {
  const created = await call(base, 'POST', '/v1/analytics/export', { token, body: { from: to, to } });
  const id = String(created.json.export_id);
  const done = await finished(id);
  t.ok(Date.parse(String(done.expires_at)) <= Date.now() + 3_600_000, 'the link lasts at most an hour');
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const kv = await nc.jetstream().views.kv(busNames(prefix).exportsBucket);
  const record = JSON.parse((await kv.get(id))!.string()) as Record<string, unknown>;
  const gone = new Date(Date.now() - 1000).toISOString();
  await kv.put(id, JSON.stringify({ ...record, expires_at: gone }));
  const r = await call(base, 'GET', `/v1/analytics/export/${id}`, { token });
  t.match(r.json, { status: 'ready', url: null, expires_at: gone });
  const old = new URL(String(done.url));
  const download = await call(base, 'GET', `${old.pathname}${old.search}`);
  t.equal(download.status, 404, 'a valid signature, but the file is no longer served');
});
