import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import aws4 from 'aws4';
import S3rver from 's3rver';
import t from 'tap';
import { ExportService } from '../../src/api/exports.js';
import { createLogger } from '../../src/log.js';
import { parseS3Url, presign } from '../../src/store/s3.js';
import { call, login } from '../helpers/api.js';
import { sendScenario } from '../helpers/compare.js';
import { drained, eventually, makeTenant, startService } from '../helpers/env.js';
import { checksum, columns, downloadParquet, line, rowLine } from '../helpers/parquet.js';
import { makeScenario } from '../helpers/scenario.js';

// Exports with EXPORT_S3_URL: ClickHouse writes the Parquet file into an S3-compatible store (s3rver, a real S3 API
// server in this process), and the link is an S3 presigned URL. The file is read back with hyparquet and compared
// with the scenario's de-duplicated events. s3rver does not check Signature V4, so the signature is checked against
// an independent signer (aws4) instead.

const DAY = 86_400_000;
const dataDir = mkdtempSync(join(tmpdir(), 'darshak-export-s3-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const s3 = new S3rver({
  port: 0,
  address: '127.0.0.1',
  silent: true,
  directory: join(dataDir, 's3'),
  configureBuckets: [{ name: 'warehouse', configs: [] }],
});
const { port } = await s3.run();
t.teardown(() => s3.close());
const s3Url = `http://S3RVER:S3RVER@127.0.0.1:${port}/warehouse/darshak/exports?region=ap-south-1`;

const svc = await startService({ data_dir: join(dataDir, 'node'), export_s3_url: s3Url }, 'ingest,aggregate,flush,api');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
const prefix = svc.config.nats_prefix;
const tenant = await makeTenant(prefix, 'delta', 'enterprise');
const now = Date.now();
const scenario = makeScenario({ seed: 31, tenants: ['delta'], now, sessionsPerTenant: 10 });
await sendScenario(svc.ingestUrl, scenario, { delta: tenant.key });
if ((await eventually(() => drained(prefix, svc.config.shards), 30_000, 200)) === -1)
  throw new Error('pipeline did not drain');
const token = await login(base, 'owner@delta.test');
const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

async function finished(id: string): Promise<Record<string, unknown>> {
  let last: Record<string, unknown> = {};
  await eventually(
    async () => {
      last = (await call(base, 'GET', `/v1/analytics/export/${id}`, { token })).json;
      return last.status !== 'pending';
    },
    60_000,
    100,
  );
  return last;
}

t.test('the file is written to the store by ClickHouse and linked by a presigned URL', async (t) => {
  const from = day(now - 30 * DAY);
  const to = day(now);
  const created = await call(base, 'POST', '/v1/analytics/export', { token, body: { from, to } });
  t.equal(created.status, 202);
  const id = String(created.json.export_id);
  const done = await finished(id);
  t.equal(done.status, 'ready', JSON.stringify(done));
  const url = new URL(String(done.url));
  t.equal(
    `${url.origin}${url.pathname}`,
    `http://127.0.0.1:${port}/warehouse/darshak/exports/delta/${id}.parquet`,
    'the object under the prefix, per tenant',
  );
  t.equal(url.searchParams.get('X-Amz-Algorithm'), 'AWS4-HMAC-SHA256');
  const expires = Number(url.searchParams.get('X-Amz-Expires'));
  t.ok(expires > 3590 && expires <= 3600, `valid one hour (${expires} s)`);
  t.equal(
    Date.parse(String(done.expires_at)),
    Date.parse(
      url.searchParams
        .get('X-Amz-Date')!
        .replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'),
    ) +
      expires * 1000,
  );

  const { res, rows, names } = await downloadParquet(String(done.url), dataDir);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-length'), String(done.bytes), 'bytes as the store has them');
  t.strictSame(names, columns);
  const fromMs = Date.parse(`${from}T00:00:00Z`);
  const expected = scenario.expected.filter((e) => e.ts >= fromMs && e.ts < Date.parse(`${to}T00:00:00Z`) + DAY);
  t.ok(expected.length > 50, `${expected.length} events`);
  t.equal(rows.length, expected.length, 'duplicates sent twice appear once');
  t.equal(done.rows, expected.length);
  t.equal(checksum(rows.map(rowLine)), checksum(expected.map(line)), 'the same values');
});

t.test(
  'the presigned URL is Signature V4 as an independent signer computes it; expired links are refused',
  async (t) => {
    const target = parseS3Url(s3Url);
    const at = Date.UTC(2026, 10, 21, 9, 30, 0);
    const mine = new URL(presign(target, 'GET', 'delta/exp_0123456789abcdef0123.parquet', 3600, at));
    const signer = new aws4.RequestSigner(
      {
        host: mine.host,
        path: `${mine.pathname}?X-Amz-Expires=3600`,
        method: 'GET',
        service: 's3',
        region: 'ap-south-1',
        signQuery: true,
      },
      { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    );
    signer.datetime = '20261121T093000Z';
    const theirs = signer.sign();
    const expected = new URL(`http://${mine.host}${theirs.path!}`);
    t.equal(
      mine.searchParams.get('X-Amz-Signature'),
      expected.searchParams.get('X-Amz-Signature'),
      'the same signature',
    );
    t.equal(mine.searchParams.get('X-Amz-Credential'), 'S3RVER/20261121/ap-south-1/s3/aws4_request');
    const expired = presign(target, 'GET', 'delta/x.parquet', 60, Date.now() - 120_000);
    t.equal((await fetch(expired)).status, 403, 'the store refuses an expired link');
  },
);

t.test('an empty range is an empty file in the store; other tenants and plans as without S3', async (t) => {
  const created = await call(base, 'POST', '/v1/analytics/export', {
    token,
    body: { from: '2020-01-01', to: '2020-01-31' },
  });
  const done = await finished(String(created.json.export_id));
  t.match(done, { status: 'ready', rows: 0 });
  t.ok((done.bytes as number) > 0);
  const { res, rows, names } = await downloadParquet(String(done.url), dataDir);
  t.equal(res.status, 200);
  t.equal(rows.length, 0);
  t.strictSame(names, columns);
});

t.test('objects past their 24 hours are deleted from the store by the sweep', async (t) => {
  const created = await call(base, 'POST', '/v1/analytics/export', {
    token,
    body: { from: day(now - DAY), to: day(now) },
  });
  const id = String(created.json.export_id);
  const done = await finished(id);
  t.equal((await fetch(String(done.url))).status, 200);
  const services = svc.started.services;
  const bus = services.get('bus');
  const kv = await bus.kv(bus.names.exportsBucket);
  const record = JSON.parse((await kv.get(id))!.string()) as Record<string, unknown>;
  t.equal(record.storage, 's3');
  await kv.put(id, JSON.stringify({ ...record, expires_at: new Date(Date.now() - 1000).toISOString() }));
  // Another api process's sweep (any of them may delete the store's objects); it sweeps once at start.
  const other = await ExportService.open(
    bus,
    services.get('store').client,
    join(dataDir, 'other'),
    s3Url,
    createLogger('silent'),
  );
  other.start();
  t.teardown(() => other.stop());
  const target = parseS3Url(s3Url);
  t.not(
    await eventually(
      async () => (await fetch(presign(target, 'GET', `delta/${id}.parquet`, 60))).status === 404,
      10_000,
      100,
    ),
    -1,
    'the object is gone',
  );
  t.not(
    await eventually(
      async () => typeof (JSON.parse((await kv.get(id))!.string()) as { deleted_at?: string }).deleted_at === 'string',
      5000,
      50,
    ),
    -1,
  );
  t.equal(
    (await call(base, 'GET', `/v1/analytics/export/${id}`, { token })).json.url,
    null,
    'and no link is handed out',
  );
});

t.test('bad EXPORT_S3_URL values are refused at start with a message that says why', async (t) => {
  t.throws(() => parseS3Url('not a url'), /is not a URL/);
  t.throws(() => parseS3Url('ftp://k:s@host/bucket'), /must be http/);
  t.throws(() => parseS3Url('https://host/bucket'), /needs credentials/);
  t.throws(() => parseS3Url('https://k:s@host/'), /needs a bucket/);
  t.throws(() => parseS3Url('https://k:s@host/bucket?acl=x'), /unknown parameter acl/);
  t.match(parseS3Url('https://AK%2F1:S%2Bx@s3.ap-south-1.amazonaws.com/bucket'), {
    accessKeyId: 'AK/1',
    secretAccessKey: 'S+x',
    bucket: 'bucket',
    prefix: '',
    region: 'us-east-1',
  });
});
