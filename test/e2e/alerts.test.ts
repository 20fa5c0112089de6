import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verify } from '@octokit/webhooks-methods';
import t from 'tap';
import WebSocket from 'ws';
import type { WireEvent } from '../../src/bus/wire.js';
import { call, login } from '../helpers/api.js';
import { loadThresholds } from '../../src/metric/thresholds.js';
import { cli, eventually, makeTenant, post, startService } from '../helpers/env.js';
import { validateComponent } from '../helpers/openapi.js';
import { Receiver, type Received } from '../../bench/webhook-receiver.js';
import { normal, playback, sendEvents } from '../helpers/traffic.js';
import { detect } from '../../bench/simulator/detect.js';

// Detection to delivery as a customer sees it: traffic through the ingest API, every role in one process, a real
// webhook receiver, the alerts API. The baseline is sent backdated (more than 10 minutes old: it feeds baselines and
// raises nothing); the last minutes carry a rebuffer spike in one pop.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-alerts-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const svc = await startService({ data_dir: dataDir, webhook_allow_hosts: ['127.0.0.0/8'] }, 'all');
t.teardown(() => svc.stop());
const receiver = await Receiver.start();
t.teardown(() => receiver.close());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
const prefix = svc.config.nats_prefix;
const env = { NATS_PREFIX: prefix };
const minute = 60_000;

const send = (key: string, events: readonly WireEvent[]): Promise<number> => sendEvents(svc.ingestUrl, key, events);

const bodies = (path: string): Array<{ r: Received; body: Record<string, unknown> }> =>
  receiver.received
    .filter((r) => r.path === path)
    .map((r) => ({ r, body: JSON.parse(r.body) as Record<string, unknown> }));

t.test(
  'a rebuffer spike in one pop reaches the webhook, signed, once; the alert is listed and acknowledgeable',
  async (t) => {
    const tenant = await makeTenant(prefix, 'acme', 'pro');
    const owner = await login(base, 'owner@acme.test');
    const hook = await call(base, 'POST', '/v1/webhooks', {
      token: owner,
      body: { url: `${receiver.url}/acme`, categories: ['qos.rebuffer_spike', 'content.new_release_detected'] },
    });
    t.equal(hook.status, 201);
    const secret = String(hook.json.secret);
    // The dashboard's live feed, open before the spike.
    const ws = new WebSocket(`${base.replace('http:', 'ws:')}/v1/live?token=${owner}`);
    t.teardown(() => ws.close());
    const pushed: Array<Record<string, unknown>> = [];
    ws.on('message', (d) => pushed.push(JSON.parse((d as Buffer).toString()) as Record<string, unknown>));
    await new Promise((r) => ws.once('open', r));

    const now = Date.now();
    const spikeFrom = now - 4 * minute;
    const events = playback(
      {
        tenant: 'acme',
        places: { Maharashtra: ['mum1', 'mum2'], Karnataka: ['blr1'] },
        perPop: 30,
        contents: ['c1', 'c2'],
        conditions: (ts, _region, pop) =>
          ts >= spikeFrom && pop === 'mum2' ? { ...normal, stallChance: 0.6, stallMs: 6000 } : normal,
      },
      now - 45 * minute,
      now,
    );
    t.ok((await send(tenant.key, events)) === events.length, `${events.length} events accepted`);

    await eventually(async () => bodies('/acme').some((b) => b.body.type === 'qos.rebuffer_spike'), 60_000, 200);
    const [spike] = bodies('/acme').filter((b) => b.body.type === 'qos.rebuffer_spike');
    t.match(spike!.body, {
      type: 'qos.rebuffer_spike',
      tenant_slug: 'acme',
      data: { severity: /^(critical|warning)$/, region: 'Maharashtra', pop: 'mum2' },
    });
    t.same(Object.keys(spike!.body).sort(), ['created_at', 'data', 'id', 'tenant_slug', 'type']);
    const signature = String(spike!.r.headers['x-service-signature']).replace(/^sha256=/, '');
    t.ok(await verify(secret, spike!.r.body, `sha256=${signature}`), 'signed with the endpoint secret');
    t.type(spike!.r.headers['x-service-delivery'], 'string');
    await eventually(async () => pushed.some((m) => m.type === 'alert'), 5000, 50);
    const live = pushed.find((m) => m.type === 'alert')!;
    t.match(live, {
      type: 'alert',
      category: 'qos.rebuffer_spike',
      source: 'qos',
      acknowledged: false,
      data: spike!.body.data,
    });
    t.same(validateComponent('LiveAlertMessage', live), [], 'the live push matches the document');
    t.same(
      bodies('/acme').filter((b) => b.body.type === 'content.new_release_detected'),
      [],
      'titles first seen in events more than 10 minutes old are no news',
    );

    // The alert as the API lists it (stored by the flush role from the alerts role's stream).
    let listed: Array<Record<string, unknown>> = [];
    await eventually(
      async () => {
        const r = await call(base, 'GET', '/v1/analytics/alerts', { token: owner });
        listed = r.body as Array<Record<string, unknown>>;
        return listed.some((a) => a.category === 'qos.rebuffer_spike');
      },
      30_000,
      200,
    );
    const alert = listed.find((a) => a.category === 'qos.rebuffer_spike')!;
    t.match(alert, {
      severity: spike!.body.data && (spike!.body.data as { severity: string }).severity,
      source: 'qos',
      acknowledged: false,
      resolved_at: null,
    });
    t.match(String(alert.title), /Rebuffering spike in Maharashtra \/ mum2/);
    const ack = await call(base, 'POST', `/v1/alerts/${String(alert.id)}/acknowledge`, { token: owner });
    t.equal(ack.status, 200);
    t.equal(ack.json.acknowledged, true);

    // A title nobody has played before is news, once.
    const premiere: WireEvent = {
      ...events[events.length - 1]!,
      event_type: 'play_start',
      session_id: 'premiere-1',
      anonymous_id: 'fan-1',
      content_id: 'premiere',
      content_title: 'The Premiere',
      ts: Date.now(),
    };
    await send(tenant.key, [premiere, { ...premiere, session_id: 'premiere-2' }]);
    await eventually(
      async () => bodies('/acme').some((b) => b.body.type === 'content.new_release_detected'),
      30_000,
      200,
    );
    await new Promise((r) => setTimeout(r, 3000));
    const releases = bodies('/acme').filter((b) => b.body.type === 'content.new_release_detected');
    t.equal(releases.length, 1);
    t.match(releases[0]!.body.data, { severity: 'info', content_id: 'premiere', title: 'The Premiere' });
    t.equal(bodies('/acme').filter((b) => b.body.type === 'qos.rebuffer_spike').length, 1, 'the spike went out once');
  },
);

t.test('the in-process path of bench:detection raises what the running service raises, causes included', async (t) => {
  // The same scenario both ways: an error spike in one app version of a region and a rebuffer spike of another app
  // version in one pop, after 40 quiet minutes, sent now. In process (bench/simulator/detect.ts) every event arrives
  // at once; the service gets them in requests of 500, and under load judges the picture between two of them. Each
  // incident lies in one cohort, so its cause is the same whichever part has arrived; a pop-wide spike's "no cohort"
  // was not (CI named a content once, the whole scenario not having arrived).
  const tenant = await makeTenant(prefix, 'twin', 'pro');
  const owner = await login(base, 'owner@twin.test');
  const now = Date.now();
  const events = playback(
    {
      tenant: 'twin',
      places: { Maharashtra: ['mum1', 'mum2'], Karnataka: ['blr1'] },
      perPop: 40,
      contents: ['c1', 'c2'],
      appVersions: ['5.12.0', '5.12.1', '5.13.0'],
      conditions: (ts, region, pop, app) =>
        region === 'Maharashtra' && app === '5.13.0' && ts >= now - 5 * minute
          ? { ...normal, fatalChance: 0.6 }
          : pop === 'blr1' && app === '5.12.0' && ts >= now - 4 * minute
            ? { ...normal, stallChance: 0.6, stallMs: 6000 }
            : normal,
    },
    now - 45 * minute,
    now,
  );
  const describe = (category: string, data: Record<string, unknown>): string => {
    const cohort = data.cohort as { dimension: string; value: string } | null;
    return `${category} ${data.region as string}${data.pop ? `/${data.pop as string}` : ''}${cohort ? ` ${cohort.dimension}=${cohort.value}` : ''}`;
  };
  const sentAt = Date.now();
  const local = detect(events.map((e) => ({ ...e, received_at: sentAt })))
    .raised.filter((r) => r.category.startsWith('qos.'))
    .map((r) => describe(r.category, r.row.data))
    .sort();
  t.same(
    local,
    ['qos.error_spike Maharashtra app_version=5.13.0', 'qos.rebuffer_spike Karnataka/blr1 app_version=5.12.0'],
    'the scenario raises what it was made for',
  );
  t.equal(await send(tenant.key, events), events.length);
  const listed = async (): Promise<string[]> =>
    (
      (await call(base, 'GET', '/v1/analytics/alerts', { token: owner })).body as Array<{
        category: string;
        data: Record<string, unknown>;
      }>
    )
      .filter((a) => a.category.startsWith('qos.'))
      .map((a) => describe(a.category, a.data))
      .sort();
  t.not(await eventually(async () => (await listed()).length >= local.length, 60_000, 250), -1);
  // Anything the service raised beyond them would come within a few batches.
  await new Promise((r) => setTimeout(r, 3000));
  t.same(await listed(), local, 'the service raised the same alerts, with the same cohorts');
});

t.test(
  'a flood of made-up titles from the public ingest key: 20 alerts and one summary, not 200 webhooks',
  async (t) => {
    const tenant = await makeTenant(prefix, 'flooded', 'enterprise');
    const owner = await login(base, 'owner@flooded.test');
    await call(base, 'POST', '/v1/webhooks', {
      token: owner,
      body: { url: `${receiver.url}/flooded`, categories: ['content.new_release_detected'] },
    });
    const now = Date.now();
    const flood = Array.from({ length: 200 }, (_, i) => ({
      event_type: 'content_published',
      content_id: `fake-${i}`,
      content_title: `Fake ${i}`,
      content_type: 'movie',
      ts: new Date(now).toISOString(),
    }));
    const r = await post(`${svc.ingestUrl}/v1/ingest/events`, { events: flood }, { 'x-api-key': tenant.key });
    t.equal(r.body.accepted, 200, 'every event is accepted: they are data');
    const releases = () => bodies('/flooded').filter((b) => b.body.type === 'content.new_release_detected');
    await eventually(
      async () => releases().some((b) => (b.body.data as { summary?: boolean }).summary === true),
      30_000,
      200,
    );
    await new Promise((r) => setTimeout(r, 3000));
    const got = releases();
    t.equal(got.length, 21, 'the first 20 one by one, then one summary');
    const summary = got.find((b) => (b.body.data as { summary?: boolean }).summary === true)!;
    t.match(summary.body.data, { severity: 'warning', summary: true, max_per_hour: 20, suppressed: 1 });
    const summaryListed = async (): Promise<boolean> =>
      ((await call(base, 'GET', '/v1/analytics/alerts', { token: owner })).body as Array<{ title: string }>).some((a) =>
        /More than 20 content.new_release_detected alerts within an hour/.test(a.title),
      );
    t.not(await eventually(summaryListed, 20_000, 200), -1, 'the summary is listed');
  },
);

t.test('quota alerts fire once each per month: at 80 % and when exceeded', async (t) => {
  const tenant = await makeTenant(prefix, 'small', 'free');
  t.equal((await cli(['tenant', 'update', '--slug', 'small', '--monthly-quota', '100'], env)).code, 0);
  const owner = await login(base, 'owner@small.test');
  await call(base, 'POST', '/v1/webhooks', {
    token: owner,
    body: { url: `${receiver.url}/small`, categories: ['ingest.quota_80pct', 'ingest.quota_exceeded'] },
  });
  const one = (i: number): WireEvent => ({
    tenant: 'small',
    env: 'production',
    event_type: 'heartbeat',
    ts: Date.now(),
    client_ts: null,
    received_at: 0,
    country: 'IN',
    region: 'Goa',
    device: 'tv',
    session_id: `q${i}`,
  });
  // The quota takes about a second to reach every ingest process; send in steps, as a client would over time.
  await send(
    tenant.key,
    Array.from({ length: 85 }, (_, i) => one(i)),
  );
  await eventually(async () => bodies('/small').some((b) => b.body.type === 'ingest.quota_80pct'), 20_000, 200);
  await send(
    tenant.key,
    Array.from({ length: 20 }, (_, i) => one(100 + i)),
  );
  await eventually(async () => bodies('/small').some((b) => b.body.type === 'ingest.quota_exceeded'), 20_000, 200);
  await new Promise((r) => setTimeout(r, 3000));
  const got = bodies('/small').map((b) => b.body);
  t.equal(got.filter((b) => b.type === 'ingest.quota_80pct').length, 1);
  t.equal(got.filter((b) => b.type === 'ingest.quota_exceeded').length, 1);
  const exceeded = got.find((b) => b.type === 'ingest.quota_exceeded')!;
  t.match(exceeded.data, { severity: 'critical', quota: 100, period: new Date().toISOString().slice(0, 7) });
  t.ok((exceeded.data as { used: number }).used >= 100);
});

t.test('per-tenant thresholds through the CLI and the API: checked, stored, shown', async (t) => {
  await makeTenant(prefix, 'tuned', 'pro');
  const bad = await cli(
    ['tenant', 'update', '--slug', 'tuned', '--alert-thresholds', '{"qos.rebuffer_spike":{"ratioo":3}}'],
    env,
  );
  t.not(bad.code, 0);
  t.match(bad.stderr, /has no threshold "ratioo"/);
  const good = await cli(
    ['tenant', 'update', '--slug', 'tuned', '--alert-thresholds', '{"qos.rebuffer_spike":{"min_sessions":10}}'],
    env,
  );
  t.equal(good.code, 0);
  t.same(good.json?.alert_thresholds, { 'qos.rebuffer_spike': { min_sessions: 10 } });
  const reset = await cli(['tenant', 'update', '--slug', 'tuned', '--alert-thresholds', 'default'], env);
  t.equal(reset.json?.alert_thresholds, null);

  const owner = await login(base, 'owner@tuned.test');
  const defaults = loadThresholds();
  const shown = await call(base, 'GET', '/v1/alert-thresholds', { token: owner });
  t.same(shown.json, { defaults, overrides: {}, effective: defaults });
  const put = await call(base, 'PUT', '/v1/alert-thresholds', {
    token: owner,
    body: { overrides: { 'qos.error_spike': { min_errors: 2 } } },
  });
  t.equal(put.status, 200);
  t.same(put.json.overrides, { 'qos.error_spike': { min_errors: 2 } });
  t.match(put.json.effective, {
    'qos.error_spike': { ...defaults['qos.error_spike'], min_errors: 2 },
    'qos.rebuffer_spike': defaults['qos.rebuffer_spike'],
  });
  for (const body of [
    { overrides: { 'qos.error_spike': { min_errors: -1 } } },
    { overrides: { nope: {} } },
    { overrides: [] },
    { overrides: {}, extra: 1 },
  ]) {
    const r = await call(base, 'PUT', '/v1/alert-thresholds', { token: owner, body });
    t.equal(r.status, 400, JSON.stringify(body));
    t.equal((r.json.error as { code: string }).code, 'invalid_request');
  }
  t.same(
    (await call(base, 'PUT', '/v1/alert-thresholds', { token: owner, body: { overrides: {} } })).json.overrides,
    {},
    '{} drops the overrides',
  );
  t.equal((await call(base, 'GET', '/v1/alert-thresholds')).status, 401);
});
