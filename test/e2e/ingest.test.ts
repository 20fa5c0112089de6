import { randomUUID } from 'node:crypto';
import t from 'tap';
import { shardOf } from '../../src/bus/wire.js';
import {
  cli,
  eventually,
  makeTenant,
  post,
  readEventStream,
  startService,
  type Service,
  type Tenant,
} from '../helpers/env.js';
import { engineTest } from '../helpers/engines.js';

// The ingest API as a client sees it (CONTRACT §4 "Ingest", §5), on both HTTP engines, checked down to what
// JetStream holds.

const iso = (ms: number): string => new Date(ms).toISOString();
const androidUa =
  'Mozilla/5.0 (Linux; Android 13; SM-S908B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/112.0.0.0 Mobile Safari/537.36';

function playStart(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    event_type: 'play_start',
    ts: iso(Date.now()),
    session_id: randomUUID(),
    content_id: 'match-42',
    anonymous_id: 'anon-1',
    ...extra,
  };
}

for (const engine of ['uws', 'node'] as const) {
  t.test(`ingest on ${engine}`, engineTest(engine), async (t) => {
    const svc: Service = await startService({ http_engine: engine, trust_proxy: true });
    t.teardown(() => svc.stop());
    const prefix = svc.config.nats_prefix;
    const env = { NATS_PREFIX: prefix };
    const tenant: Tenant = await makeTenant(prefix);
    const events = `${svc.ingestUrl}/v1/ingest/events`;
    const beacon = `${svc.ingestUrl}/v1/ingest/beacon`;
    const auth = { 'x-api-key': tenant.key };
    const published = async (): Promise<number> =>
      (await readEventStream(prefix)).reduce((n, m) => n + m.events.length, 0);

    t.test('three ways to send a key; anything else is 401 invalid_api_key', async (t) => {
      const a = await post(events, { events: [playStart()] }, auth);
      t.equal(a.status, 200);
      t.same(a.body, { accepted: 1, rejected: 0, queued: true, errors: [] });
      t.equal((await post(events, { events: [playStart()] }, { authorization: `Bearer ${tenant.key}` })).status, 200);
      const b = await post(`${beacon}?api_key=${tenant.key}`, { events: [playStart()] });
      t.equal(b.body.accepted, 1);
      for (const headers of [
        {},
        { 'x-api-key': 'dk_live_nope' },
        { authorization: `Basic ${tenant.key}` },
        { 'x-api-key': 'x'.repeat(5000) },
      ] as Array<Record<string, string>>) {
        const r = await post(events, { events: [playStart()] }, headers);
        t.equal(r.status, 401);
        t.equal((r.body.error as { code: string }).code, 'invalid_api_key');
      }
      const q = await post(`${events}?api_key=${tenant.key}`, { events: [playStart()] });
      t.equal(q.status, 401, 'the query form is for beacons only: keys in URLs end up in logs');
    });

    t.test('request errors: 400 invalid_json / invalid_body / too_many_events / validation_failed, 413', async (t) => {
      const before = await published();
      const code = async (body: unknown, status: number, expected: string): Promise<Record<string, unknown>> => {
        const r = await post(events, body, auth);
        t.equal(r.status, status, expected);
        const err = r.body.error as { code: string; message: string; request_id: string };
        t.equal(err.code, expected);
        t.equal(err.request_id, r.headers.get('x-request-id'));
        t.ok(r.headers.get('ratelimit-limit'), 'RateLimit-* on errors too');
        return r.body;
      };
      await code('{"events":[', 400, 'invalid_json');
      await code(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 400, 'invalid_json');
      await code('[]', 400, 'invalid_body');
      await code({ events: {} }, 400, 'invalid_body');
      await code({ events: [] }, 400, 'invalid_body');
      await code({ events: [playStart()], extra: 1 }, 400, 'invalid_body');
      await code({ events: [playStart()], sent_at: 'yesterday' }, 400, 'invalid_body');
      await code({ events: Array.from({ length: 501 }, () => playStart()) }, 400, 'too_many_events');
      const v = await code({ events: [{ event_type: 'heartbeat' }, 42] }, 400, 'validation_failed');
      t.same((v.error as { details: unknown[] }).details, [
        { index: 0, code: 'missing_field', message: '"session_id" is required for heartbeat' },
        { index: 1, code: 'invalid_event', message: 'event must be a JSON object' },
      ]);
      const big = { events: [playStart({ properties: { pad: 'x'.repeat(1_048_576) } })] };
      await code(big, 413, 'payload_too_large');
      t.equal(await published(), before, 'nothing from a refused request reached the stream');
    });

    t.test('partial batches: valid events accepted, the rest listed by index', async (t) => {
      const r = await post(
        events,
        {
          events: [
            playStart(),
            { event_type: 'Bad Type', session_id: 's' },
            { event_type: 'heartbeat', session_id: 's', position_sec: -1 },
            { event_type: 'pause', session_id: 's', colour: 'red' },
            { event_type: 'heartbeat', session_id: 's', content_title: 'x'.repeat(513) },
            { event_type: 'play_start', session_id: 's', content_id: 'c' },
            { event_type: 'heartbeat', session_id: 's', ts: '2026-11-21 10:00:00' },
            { event_type: 'heartbeat', session_id: 's', event_id: 'not-a-uuid' },
            {
              event_type: 'heartbeat',
              session_id: 's',
              properties: { deep: JSON.parse('['.repeat(20) + ']'.repeat(20)) as unknown },
            },
            { event_type: 'heartbeat', session_id: 's', context: { device_type: 'fridge' } },
            { event_type: 'payment_succeeded', user_id: 'u1', properties: {} },
            { event_type: 'checkout.viewed', session_id: 's', properties: { any: ['thing'] } },
          ],
        },
        auth,
      );
      t.equal(r.status, 200);
      t.equal(r.body.accepted, 2);
      t.equal(r.body.rejected, 10);
      t.same(
        (r.body.errors as Array<{ index: number; code: string }>).map((e) => [e.index, e.code]),
        [
          [1, 'invalid_field'],
          [2, 'invalid_field'],
          [3, 'unknown_field'],
          [4, 'field_too_long'],
          [5, 'missing_field'],
          [6, 'invalid_field'],
          [7, 'invalid_field'],
          [8, 'properties_too_large'],
          [9, 'invalid_field'],
          [10, 'missing_field'],
        ],
      );
    });

    t.test('timestamps: server_ts=1, skew with and without sent_at, client_ts kept', async (t) => {
      const now = Date.now();
      const mark = randomUUID();
      const tag = (name: string, ts: number): Record<string, unknown> => ({
        event_type: 'heartbeat',
        session_id: `${mark}-${name}`,
        ts: iso(ts),
      });
      // Without sent_at: within 30 s kept, beyond replaced by the receive time.
      await post(
        events,
        { events: [tag('near', now - 10_000), tag('far', now - 3_600_000), tag('future', now + 120_000)] },
        auth,
      );
      // With sent_at two hours behind: the whole batch shifts by the skew, keeping spacing.
      const skew = 2 * 3_600_000;
      await post(
        events,
        { sent_at: iso(now - skew), events: [tag('s1', now - skew - 60_000), tag('s2', now - skew - 50_000)] },
        auth,
      );
      // With sent_at within tolerance: nothing moves, even old events (an offline buffer).
      await post(events, { sent_at: iso(now), events: [tag('old', now - 86_400_000)] }, auth);
      await post(
        `${events}?server_ts=1`,
        { events: [tag('server', now - 5_000), { event_type: 'heartbeat', session_id: `${mark}-nots` }] },
        auth,
      );
      const after = Date.now();
      const got = new Map(
        (await readEventStream(prefix))
          .flatMap((m) => m.events)
          .filter((e) => e.session_id?.startsWith(mark))
          .map((e) => [e.session_id?.slice(mark.length + 1), e]),
      );
      const near = got.get('near');
      t.equal(near?.ts, now - 10_000);
      const far = got.get('far');
      t.ok(far && far.ts >= now && far.ts <= after && far.ts === far.received_at, 'far past → receive time');
      t.equal(far?.client_ts, now - 3_600_000, 'original kept as client_ts');
      t.ok(got.get('future')?.ts === got.get('future')?.received_at);
      const s1 = got.get('s1');
      const s2 = got.get('s2');
      t.ok(s1 && s2 && Math.abs(s1.ts - (now - 60_000)) < after - now + 50, 'shifted by the skew');
      t.equal((s2?.ts ?? 0) - (s1?.ts ?? 0), 10_000, 'spacing kept');
      t.equal(got.get('old')?.ts, now - 86_400_000);
      t.equal(got.get('server')?.ts, got.get('server')?.received_at);
      t.equal(got.get('server')?.client_ts, now - 5_000);
      t.equal(got.get('nots')?.client_ts, null);
    });

    t.test('enrichment: geo from context or client IP, device from context or user agent', async (t) => {
      const mark = randomUUID();
      await post(
        events,
        {
          events: [
            {
              event_type: 'heartbeat',
              session_id: `${mark}-ctx`,
              context: { country: 'in', region: 'Kerala', device_type: 'tv' },
            },
            { event_type: 'heartbeat', session_id: `${mark}-ip` },
            {
              event_type: 'heartbeat',
              session_id: `${mark}-ctxip`,
              context: {
                ip: '8.8.8.8',
                user_agent:
                  'Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36',
              },
            },
          ],
        },
        { ...auth, 'x-forwarded-for': '49.36.0.1, 10.0.0.1', 'user-agent': androidUa },
      );
      const got = new Map(
        (await readEventStream(prefix))
          .flatMap((m) => m.events)
          .filter((e) => e.session_id?.startsWith(mark))
          .map((e) => [e.session_id?.slice(mark.length + 1), e]),
      );
      t.match(got.get('ctx'), { country: 'IN', region: 'Kerala', device: 'tv', env: 'production', tenant: 'acme' });
      t.match(got.get('ip'), { country: 'IN', region: 'Maharashtra', device: 'mobile' });
      t.match(got.get('ctxip'), { country: 'US', region: 'California', device: 'tv' });
    });

    t.test('publish: events of a session stay on one shard; one message per shard per request', async (t) => {
      const before = (await readEventStream(prefix)).length;
      const sessions = Array.from({ length: 40 }, () => randomUUID());
      const batch = sessions.flatMap((s) => [
        { event_type: 'heartbeat', session_id: s },
        { event_type: 'pause', session_id: s },
      ]);
      t.equal((await post(events, { events: batch }, auth)).body.accepted, 80);
      const messages = (await readEventStream(prefix)).slice(before);
      const shards = new Set(sessions.map((s) => shardOf('acme', s, svc.config.shards)));
      t.equal(messages.length, shards.size, 'one message per shard the request touched');
      for (const m of messages) {
        const shard = Number(m.subject.split('.').pop());
        for (const e of m.events) t.equal(shardOf(e.tenant, e.session_id ?? '', svc.config.shards), shard);
      }
      t.equal(
        messages.reduce((n, m) => n + m.events.length, 0),
        80,
      );
    });

    t.test('beacon: adata, JSON body, text/plain body; 200 for every outcome', async (t) => {
      const one = JSON.stringify({ events: [playStart()] });
      const viaQuery = await fetch(`${beacon}?api_key=${tenant.key}&adata=${encodeURIComponent(one)}`, {
        method: 'POST',
      });
      t.same(await viaQuery.json(), { accepted: 1, rejected: 0, queued: true, errors: [] });
      const plain = await fetch(`${beacon}?api_key=${tenant.key}`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain;charset=UTF-8' },
        body: one,
      });
      t.equal(((await plain.json()) as { accepted: number }).accepted, 1);
      for (const [url, body] of [
        [`${beacon}?api_key=wrong`, one],
        [`${beacon}?api_key=${tenant.key}`, '{not json'],
        [`${beacon}?api_key=${tenant.key}&adata=%7B`, ''],
        [`${beacon}?api_key=${tenant.key}`, JSON.stringify({ events: [{ event_type: 'heartbeat' }] })],
      ] as const) {
        const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'text/plain' }, body });
        t.equal(r.status, 200, `beacon answers 200 to ${url.slice(-20)} ${body.slice(0, 20)}`);
        const b = (await r.json()) as { accepted: number; queued: boolean; errors: Array<{ code: string }> };
        t.equal(b.accepted, 0);
        t.equal(b.queued, false);
        t.ok(b.errors[0]?.code);
      }
    });

    t.test('RateLimit-* on every answer, including unknown routes and preflight', async (t) => {
      for (const res of [
        await fetch(`${svc.ingestUrl}/nope`),
        await fetch(events, { method: 'OPTIONS', headers: { origin: 'https://x.test' } }),
      ]) {
        t.ok(res.headers.get('ratelimit-limit'));
        t.ok(res.headers.get('ratelimit-remaining'));
        t.ok(res.headers.get('ratelimit-reset'));
      }
      const r = await post(events, { events: [playStart(), playStart()] }, auth);
      t.equal(r.headers.get('ratelimit-limit'), '120000', 'pro plan');
      t.ok(Number(r.headers.get('ratelimit-remaining')) <= 120_000 - 2);
    });

    t.test('limits set through the CLI: rate 429 with Retry-After, quota 403, inactive 403', async (t) => {
      const small = await makeTenant(prefix, 'tiny', 'free');
      const key = { 'x-api-key': small.key };
      t.equal((await cli(['tenant', 'update', '--slug', 'tiny', '--rate-per-minute', '3'], env)).code, 0);
      t.not(
        await eventually(
          async () => (await post(events, { events: [playStart()] }, key)).headers.get('ratelimit-limit') === '3',
        ),
        -1,
      );
      // The probe above may have used part of the minute: send until refused.
      let r = await post(events, { events: [playStart(), playStart()] }, key);
      for (let i = 0; i < 3 && r.status === 200; i++) r = await post(events, { events: [playStart()] }, key);
      t.equal(r.status, 429);
      t.equal((r.body.error as { code: string }).code, 'rate_limited');
      t.equal(r.headers.get('ratelimit-remaining'), '0');
      t.ok(Number(r.headers.get('retry-after')) >= 1 && Number(r.headers.get('retry-after')) <= 60);
      t.equal(r.headers.get('retry-after'), r.headers.get('ratelimit-reset'));

      t.equal(
        (await cli(['tenant', 'update', '--slug', 'tiny', '--rate-per-minute', 'plan', '--monthly-quota', '2'], env))
          .code,
        0,
      );
      const quota = await eventually(async () => {
        const q = await post(events, { events: [playStart()] }, key);
        return q.status === 403 && (q.body.error as { code: string }).code === 'quota_exceeded';
      });
      t.not(quota, -1, 'quota_exceeded once the month holds 2 events');

      t.equal((await cli(['tenant', 'update', '--slug', 'acme', '--status', 'inactive'], env)).code, 0);
      const inactive = await eventually(
        async () => (await post(events, { events: [playStart()] }, auth)).status === 403,
      );
      t.not(inactive, -1);
      t.equal(
        ((await post(events, { events: [playStart()] }, auth)).body.error as { code: string }).code,
        'tenant_inactive',
      );
      t.equal((await cli(['tenant', 'update', '--slug', 'acme', '--status', 'active'], env)).code, 0);
      t.not(await eventually(async () => (await post(events, { events: [playStart()] }, auth)).status === 200), -1);
    });

    t.test('a revoked key is refused within 1 s', async (t) => {
      const k = await cli(
        ['apikey', 'create', '--tenant', 'acme', '--name', 'to-revoke', '--environment', 'staging'],
        env,
      );
      const key = String(k.json?.key);
      t.match(key, /^dk_stg_[0-9A-Za-z]{32}$/);
      t.not(
        await eventually(
          async () => (await post(events, { events: [playStart()] }, { 'x-api-key': key })).status === 200,
        ),
        -1,
      );
      const revoked = await cli(['apikey', 'revoke', '--tenant', 'acme', '--id', String(k.json?.id)], env);
      t.equal(revoked.code, 0);
      const took = await eventually(
        async () => (await post(events, { events: [playStart()] }, { 'x-api-key': key })).status === 401,
        3000,
        10,
      );
      t.ok(took >= 0 && took < 1000, `refused ${took} ms after the CLI returned`);
    });
  });
}
