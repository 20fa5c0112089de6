import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { insertAlerts, type AlertRow } from '../../src/store/alerts.js';
import { call, inOneMinute, login } from '../helpers/api.js';
import { sendScenario } from '../helpers/compare.js';
import { cli, drained, eventually, makeTenant, startService } from '../helpers/env.js';
import { makeScenario } from '../helpers/scenario.js';

// The analytics endpoints' parameters, paging, tenancy, alerts and rate limit, over HTTP. The numbers themselves are
// compared with the oracle in metrics.test.ts.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-api-analytics-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

const svc = await startService({ data_dir: dataDir }, 'all');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
const prefix = svc.config.nats_prefix;
const alpha = await makeTenant(prefix, 'alpha', 'pro');
await makeTenant(prefix, 'empty', 'free');
const scenario = makeScenario({ seed: 11, tenants: ['alpha'], now: Date.now(), sessionsPerTenant: 30 });
await sendScenario(svc.ingestUrl, scenario, { alpha: alpha.key });
if ((await eventually(() => drained(prefix, svc.config.shards), 30_000, 200)) === -1)
  throw new Error('pipeline did not drain');
const token = await login(base, 'owner@alpha.test');
const emptyToken = await login(base, 'owner@empty.test');
const store = svc.started.services.get('store').client;

t.test("an empty tenant gets zeros and empty lists, not another tenant's data", async (t) => {
  const overview = await call(base, 'GET', '/v1/analytics/overview?range=30d', { token: emptyToken });
  t.same(overview.body, {
    monthly_active_users: 0,
    watch_hours: 0,
    paid_subscribers: 0,
    arpu_inr: 0,
    churn_pct: 0,
    wow_delta: { mau: 0, watch_hours: 0, subs: 0, revenue: 0 },
  });
  for (const path of ['top-content', 'geo', 'qos', 'devices', 'alerts']) {
    const r = await call(base, 'GET', `/v1/analytics/${path}`, { token: emptyToken });
    t.equal(r.status, 200, path);
    t.same(r.body, [], path);
  }
  const c = await call(base, 'GET', '/v1/analytics/concurrency', { token: emptyToken });
  t.match(c.json, { interval_minutes: 5, peak: 0 });
  t.ok(
    [288, 289].includes((c.json.points as unknown[]).length),
    '24 h of 5-minute points (a partial one at each end), all zero',
  );
  t.ok((c.json.points as Array<{ value: number }>).every((p) => p.value === 0));
  const full = await call(base, 'GET', '/v1/analytics/overview?range=30d', { token });
  t.ok(Number(full.json.monthly_active_users) > 0, 'while alpha has viewers');
});

t.test('defaults, paging and X-Total-Count', async (t) => {
  const all = await call(base, 'GET', '/v1/analytics/top-content?limit=200', { token });
  const total = Number(all.headers.get('x-total-count'));
  t.equal((all.body as unknown[]).length, total);
  t.ok(total >= 3, `${total} titles`);
  const page = await call(base, 'GET', '/v1/analytics/top-content?limit=2&offset=1', { token });
  t.same(page.body, (all.body as unknown[]).slice(1, 3));
  t.equal(page.headers.get('x-total-count'), String(total));
  const past = await call(base, 'GET', '/v1/analytics/top-content?offset=1000000', { token });
  t.same(past.body, []);
  const byDefault = await call(base, 'GET', '/v1/analytics/concurrency', { token });
  const explicit = await call(base, 'GET', '/v1/analytics/concurrency?range=24h&interval=5', { token });
  t.same(byDefault.body, explicit.body, 'range 24h and interval 5 by default');
  t.equal((await call(base, 'GET', '/v1/analytics/concurrency?range=7d&interval=60', { token })).status, 200);
  for (const r of ['24h', '7d', '30d', 'qtd'])
    t.equal((await call(base, 'GET', `/v1/analytics/overview?range=${r}`, { token })).status, 200, r);
  t.ok(all.headers.get('ratelimit-limit'), 'rate headers on analytics answers');
});

t.test('bad and hostile parameters are 400 naming the parameter, never 5xx', async (t) => {
  const cases: Array<[string, string]> = [
    ['/v1/analytics/overview?range=1y', 'range'],
    ['/v1/analytics/overview?range=24h&range=7d', 'range'],
    ['/v1/analytics/overview?range=', 'range'],
    ["/v1/analytics/overview?range=24h'%20OR%201=1--", 'range'],
    ['/v1/analytics/overview?tenant=bravo', 'tenant'],
    ['/v1/analytics/overview?range[]=24h', 'range[]'],
    ['/v1/analytics/concurrency?interval=7', 'interval'],
    ['/v1/analytics/concurrency?range=7d&interval=5', 'interval'],
    ['/v1/analytics/concurrency?range=30d&interval=1', 'interval'],
    ['/v1/analytics/concurrency?interval=1e1', 'interval'],
    ['/v1/analytics/top-content?limit=201', 'limit'],
    ['/v1/analytics/top-content?limit=0', 'limit'],
    ['/v1/analytics/top-content?limit=-1', 'limit'],
    ['/v1/analytics/top-content?limit=%2B5', 'limit'],
    ['/v1/analytics/top-content?limit=5.0', 'limit'],
    ['/v1/analytics/top-content?limit=99999999999999999999999', 'limit'],
    ['/v1/analytics/top-content?offset=1000001', 'offset'],
    ['/v1/analytics/top-content?offset=0x10', 'offset'],
    ['/v1/analytics/geo?limit=%EF%BC%95', 'limit'],
    ['/v1/analytics/qos?range=1h', 'range'],
    ['/v1/analytics/devices?limit=5', 'limit'],
    ['/v1/analytics/alerts?acknowledged=yes', 'acknowledged'],
    ['/v1/analytics/alerts?severity=CRITICAL', 'severity'],
    ['/v1/analytics/alerts?severity=%00', 'severity'],
    ['/v1/analytics/alerts?range=24h', 'range'],
    [`/v1/analytics/geo?${'x'.repeat(500)}=1`, `${'x'.repeat(64)}…`],
  ];
  for (const [path, parameter] of cases) {
    const r = await call(base, 'GET', path, { token });
    t.equal(r.status, 400, path.slice(0, 120));
    t.match(r.json, { error: { code: 'invalid_parameter', details: [{ parameter }] } }, path.slice(0, 120));
  }
  const malformed = await fetch(`${base}/v1/analytics/geo?limit=%E0%A4`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.ok(malformed.status < 500, `broken percent-encoding: ${malformed.status}`);
  for (const id of ['0', '-1', 'abc', '1%20OR%201=1', '99999999999999999999', '%F0%9F%92%A5']) {
    const r = await call(base, 'POST', `/v1/alerts/${id}/acknowledge`, { token });
    t.equal(r.status, 404, `acknowledge ${id}`);
  }
});

t.test('alerts: newest first, filtered, paged, acknowledged once, never across tenants', async (t) => {
  const at = Date.now() - 3_600_000;
  const row = (tenant: string, id: number, severity: string, minutes: number): AlertRow => ({
    tenant,
    id,
    category: 'qos.rebuffer_spike',
    severity,
    source: 'qos',
    title: `Rebuffering spike ${id}`,
    description: 'Rebuffer rate 9.1% against a baseline of 1.2% in Maharashtra / BOM1',
    data: {
      severity,
      region: 'Maharashtra',
      pop: 'BOM1',
      current_rate: 9.1,
      baseline_rate: 1.2,
      affected_sessions: 40,
    },
    created_at: at + minutes * 60_000,
    resolved_at: null,
    version: 1,
  });
  await insertAlerts(
    store,
    [
      row('alpha', 1, 'warning', 0),
      row('alpha', 2, 'critical', 5),
      row('alpha', 3, 'critical', 10),
      row('empty', 4, 'critical', 1),
    ],
    'alerts:1',
  );
  // A later version (the incident resolved) replaces the first.
  await insertAlerts(
    store,
    [{ ...row('alpha', 2, 'critical', 5), resolved_at: at + 20 * 60_000, version: 2 }],
    'alerts:2',
  );
  const list = await call(base, 'GET', '/v1/analytics/alerts', { token });
  t.equal(list.status, 200);
  t.same(
    (list.body as Array<{ id: number }>).map((a) => a.id),
    [3, 2, 1],
    'newest first, only this tenant',
  );
  t.equal(list.headers.get('x-total-count'), '3');
  t.match((list.body as Array<Record<string, unknown>>)[1], {
    id: 2,
    severity: 'critical',
    source: 'qos',
    acknowledged: false,
    acknowledged_at: null,
    resolved_at: new Date(at + 20 * 60_000).toISOString(),
    created_at: new Date(at + 5 * 60_000).toISOString(),
    data: { region: 'Maharashtra' },
  });
  const critical = await call(base, 'GET', '/v1/analytics/alerts?severity=critical&limit=1&offset=1', { token });
  t.same(
    (critical.body as Array<{ id: number }>).map((a) => a.id),
    [2],
  );
  t.equal(critical.headers.get('x-total-count'), '2');

  t.equal(
    (await call(base, 'POST', '/v1/alerts/4/acknowledge', { token })).status,
    404,
    "another tenant's alert is not found",
  );
  const ack = await call(base, 'POST', '/v1/alerts/2/acknowledge', { token });
  t.equal(ack.status, 200);
  t.match(ack.json, { id: 2, acknowledged: true, acknowledged_at: String });
  const again = await call(base, 'POST', '/v1/alerts/2/acknowledge', { token });
  t.same(again.json, ack.json, 'acknowledging again changes nothing');
  t.same(
    ((await call(base, 'GET', '/v1/analytics/alerts?acknowledged=true', { token })).body as Array<{ id: number }>).map(
      (a) => a.id,
    ),
    [2],
  );
  t.same(
    ((await call(base, 'GET', '/v1/analytics/alerts?acknowledged=false', { token })).body as Array<{ id: number }>).map(
      (a) => a.id,
    ),
    [3, 1],
  );
  const viewerCreated = await cli(
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
  t.equal(viewerCreated.code, 0);
  const viewer = await login(base, 'v@alpha.test');
  t.equal(
    (await call(base, 'POST', '/v1/alerts/3/acknowledge', { token: viewer })).status,
    403,
    'viewers cannot acknowledge',
  );
});

t.test(
  'past 300 requests a minute per token: 429 with Retry-After and RateLimit-*; other tokens unaffected',
  async (t) => {
    const { own, first, last } = await inOneMinute(async () => {
      const own = await login(base, 'owner@alpha.test');
      const first = await call(base, 'GET', '/v1/analytics/devices', { token: own });
      let last = first;
      for (let i = 1; i < 300; i++) last = await call(base, 'GET', '/v1/analytics/devices', { token: own });
      return { own, first, last };
    });
    t.equal(first.headers.get('ratelimit-limit'), '300');
    t.equal(first.headers.get('ratelimit-remaining'), '299');
    t.equal(last.status, 200, 'the 300th is served');
    t.equal(last.headers.get('ratelimit-remaining'), '0');
    const refused = await call(base, 'GET', '/v1/analytics/devices', { token: own });
    t.equal(refused.status, 429);
    t.match(refused.json, { error: { code: 'rate_limited' } });
    const retry = Number(refused.headers.get('retry-after'));
    t.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    t.equal(refused.headers.get('ratelimit-reset'), String(retry));
    t.equal(
      (await call(base, 'GET', '/v1/analytics/devices', { token })).status,
      200,
      'another token of the same user is not limited',
    );
  },
);
