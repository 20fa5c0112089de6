import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verify } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { call, login } from '../helpers/api.js';
import { eventually, makeTenant, startService } from '../helpers/env.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { internalHosts } from '../helpers/internal-addresses.js';

// Webhook endpoints over HTTP as a customer would use them, delivered to a real receiver by the webhooks role;
// every answer is checked against docs/openapi.json by `call`.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-api-webhooks-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const svc = await startService({ data_dir: dataDir, webhook_allow_hosts: ['127.0.0.0/8'] }, 'api,webhooks');
t.teardown(() => svc.stop());
const receiver = await Receiver.start();
t.teardown(() => receiver.close());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
const prefix = svc.config.nats_prefix;
await makeTenant(prefix, 'acme', 'pro');
await makeTenant(prefix, 'other', 'pro');
const owner = await login(base, 'owner@acme.test');
const otherOwner = await login(base, 'owner@other.test');

const create = (body: unknown, token = owner) => call(base, 'POST', '/v1/webhooks', { token, body });

t.test('create, list, get, update; secrets only at creation and rotation', async (t) => {
  const r = await create({
    url: `${receiver.url}/hooks/a`,
    categories: ['qos.rebuffer_spike', 'qos.error_spike'],
    description: 'ops',
  });
  t.equal(r.status, 201);
  t.match(r.json, {
    url: `${receiver.url}/hooks/a`,
    format: 'json',
    enabled: true,
    categories: ['qos.rebuffer_spike', 'qos.error_spike'],
  });
  t.match(String(r.json.id), /^wh_[0-9a-f]{20}$/);
  t.match(String(r.json.secret), /^whsec_[A-Za-z0-9+/]{43}=$/);
  const id = String(r.json.id);
  const list = await call(base, 'GET', '/v1/webhooks', { token: owner });
  t.equal(list.status, 200);
  t.ok((list.body as Array<{ id: string }>).some((w) => w.id === id));
  t.notMatch(JSON.stringify(list.body), /whsec_/, 'no secret in the list');
  const one = await call(base, 'GET', `/v1/webhooks/${id}`, { token: owner });
  t.match(one.json, { id, description: 'ops', disabled_at: null });
  const patched = await call(base, 'PATCH', `/v1/webhooks/${id}`, {
    token: owner,
    body: { categories: ['billing.churn_spike'], enabled: false },
  });
  t.match(patched.json, { categories: ['billing.churn_spike'], enabled: false });
  t.type(patched.json.disabled_at, 'string');
  const again = await call(base, 'PATCH', `/v1/webhooks/${id}`, { token: owner, body: { enabled: true } });
  t.match(again.json, { enabled: true, disabled_at: null });
  const slack = await create({
    url: 'https://hooks.slack.com/services/T000/B000/XXXX',
    categories: ['qos.rebuffer_spike'],
  });
  t.equal(slack.json.format, 'slack', 'a Slack URL means the Slack format');
});

t.test('an internal address is refused when the endpoint is created or changed, not only at delivery', async (t) => {
  // Every textual form (issue 60: `[::7f00:1]`, IPv4-compatible 127.0.0.1, was taken). This service exempts
  // 127.0.0.0/8 for its receiver, which covers 127.0.0.1 however IPv4 spells it and its IPv4-mapped form (a socket to
  // either reaches it), and no other form that carries it: IPv4-compatible, NAT64 and 6to4 reach other hosts.
  const exempted = new Set([
    '127.0.0.1',
    '2130706433',
    '0x7f000001',
    '0177.0.0.1',
    '127.1',
    '[::ffff:127.0.0.1]',
    '[::ffff:7f00:1]',
  ]);
  const internal = internalHosts.filter(([, host]) => !exempted.has(host)).map(([, host]) => `http://${host}/hook`);
  t.ok(internal.includes('http://[::7f00:1]/hook') && internal.includes('http://[64:ff9b::7f00:1]/hook'));
  for (const url of internal) {
    const r = await create({ url, categories: ['qos.error_spike'] });
    t.equal(r.status, 400, url);
    t.match(r.json, { error: { code: 'invalid_request', message: /SSRF guard/ } }, url);
  }
  const unresolved = await create({ url: 'https://no-such-host.invalid/hook', categories: ['qos.error_spike'] });
  t.equal(unresolved.status, 201, 'a name that does not resolve yet is judged at delivery');
  const moved = await call(base, 'PATCH', `/v1/webhooks/${String(unresolved.json.id)}`, {
    token: owner,
    body: { url: 'http://192.168.1.10/hook' },
  });
  t.equal(moved.status, 400, 'nor can an endpoint be moved to one');
  for (const url of internal) {
    const r = await call(base, 'PATCH', `/v1/webhooks/${String(unresolved.json.id)}`, { token: owner, body: { url } });
    t.equal(r.status, 400, `nor moved to ${url}`);
  }
  const kept = await call(base, 'GET', `/v1/webhooks/${String(unresolved.json.id)}`, { token: owner });
  t.equal(kept.json.url, 'https://no-such-host.invalid/hook');
  t.equal(
    (await create({ url: `${receiver.url}/exempt`, categories: ['qos.error_spike'] })).status,
    201,
    'WEBHOOK_ALLOW_HOSTS still exempts',
  );
});

t.test('bad bodies, other tenants and other scopes are refused', async (t) => {
  t.equal((await create({ url: 'ftp://example.com/x', categories: ['qos.error_spike'] })).status, 400);
  t.equal(
    (await create({ url: `https://example.com/${'a'.repeat(2048)}`, categories: ['qos.error_spike'] })).status,
    400,
  );
  t.equal((await create({ url: 'https://example.com/x', categories: [] })).status, 400);
  t.equal(
    (await create({ url: 'https://example.com/x', categories: ['test.ping'] })).status,
    400,
    'test.ping is not subscribable',
  );
  t.equal((await create({ url: 'https://example.com/x', categories: ['qos.error_spike'], colour: 'red' })).status, 400);
  const mine = await create({ url: 'https://example.com/x', categories: ['qos.error_spike'] });
  const id = String(mine.json.id);
  for (const [method, path] of [
    ['GET', `/v1/webhooks/${id}`],
    ['PATCH', `/v1/webhooks/${id}`],
    ['DELETE', `/v1/webhooks/${id}`],
    ['POST', `/v1/webhooks/${id}/rotate-secret`],
    ['GET', `/v1/webhooks/${id}/deliveries`],
    ['POST', `/v1/webhooks/${id}/test`],
  ] as const) {
    const r = await call(base, method, path, {
      token: otherOwner,
      ...(method === 'PATCH' ? { body: { enabled: true } } : {}),
    });
    t.equal(r.status, 404, `${method} ${path} of another tenant`);
  }
  t.notOk(
    ((await call(base, 'GET', '/v1/webhooks', { token: otherOwner })).body as Array<{ id: string }>).some(
      (w) => w.id === id,
    ),
  );
  t.equal((await call(base, 'GET', '/v1/webhooks')).status, 401);
  t.equal((await call(base, 'GET', `/v1/webhooks/${id}/deliveries?limit=500`, { token: owner })).status, 400);
  const deleted = await call(base, 'DELETE', `/v1/webhooks/${id}`, { token: owner });
  t.equal(deleted.status, 200);
  t.equal((await call(base, 'GET', `/v1/webhooks/${id}`, { token: owner })).status, 404);
});

t.test('a test ping arrives signed; rotation signs with both secrets; replay keeps X-Service-Delivery', async (t) => {
  const created = await create({ url: `${receiver.url}/hooks/ping`, categories: ['content.new_release_detected'] });
  const id = String(created.json.id);
  const secret = String(created.json.secret);
  const ping = await call(base, 'POST', `/v1/webhooks/${id}/test`, { token: owner });
  t.equal(ping.status, 202);
  const arrived = (deliveryId: string) =>
    receiver.received.filter((r) => r.headers['x-service-delivery'] === deliveryId);
  t.not(await eventually(async () => arrived(String(ping.json.delivery_id)).length === 1, 10_000), -1, 'delivered');
  const got = arrived(String(ping.json.delivery_id))[0]!;
  t.equal(got.headers['content-type'], 'application/json');
  t.match(JSON.parse(got.body), { id: ping.json.event_id, type: 'test.ping', tenant_slug: 'acme', data: {} });
  const signature = String(got.headers['x-service-signature']);
  t.ok(await verify(secret, got.body, signature), 'verified by @octokit/webhooks-methods');
  const changed = got.body.replace('test.ping', 'test.pinh');
  t.notOk(await verify(secret, changed, signature), 'one changed byte is rejected');
  t.ok(
    Math.abs(Number(got.headers['x-service-timestamp']) - Date.now() / 1000) < 30,
    'X-Service-Timestamp is Unix seconds',
  );
  t.equal(got.headers['x-service-signature-previous'], undefined, 'no previous signature outside a rotation');
  t.ok(
    new Webhook(secret).verify(got.body, got.headers as Record<string, string>),
    'the timestamped signature verified by standardwebhooks',
  );

  const rotated = await call(base, 'POST', `/v1/webhooks/${id}/rotate-secret`, { token: owner });
  t.equal(rotated.status, 200);
  const newSecret = String(rotated.json.secret);
  t.not(newSecret, secret);
  const ping2 = await call(base, 'POST', `/v1/webhooks/${id}/test`, { token: owner });
  t.not(await eventually(async () => arrived(String(ping2.json.delivery_id)).length === 1, 10_000), -1);
  const got2 = arrived(String(ping2.json.delivery_id))[0]!;
  t.ok(await verify(newSecret, got2.body, String(got2.headers['x-service-signature'])), 'the new secret signs');
  t.ok(
    await verify(secret, got2.body, String(got2.headers['x-service-signature-previous'])),
    'the old secret signs X-Service-Signature-Previous',
  );
  t.notOk(await verify(secret, got2.body, String(got2.headers['x-service-signature'])));

  const log = await call(base, 'GET', `/v1/webhooks/${id}/deliveries`, { token: owner });
  t.equal(log.status, 200);
  const attempts = log.body as Array<Record<string, unknown>>;
  t.equal(attempts.length, 2);
  t.match(attempts[0], {
    delivery_id: ping2.json.delivery_id,
    status: 'succeeded',
    response_code: 200,
    attempt: 1,
    type: 'test.ping',
    request_body: got2.body,
    next_attempt_at: null,
  });
  t.equal(attempts[1]!.delivery_id, ping.json.delivery_id, 'newest first');

  const replay = await call(base, 'POST', `/v1/webhooks/${id}/deliveries/${String(ping.json.delivery_id)}/replay`, {
    token: owner,
  });
  t.equal(replay.status, 202);
  t.not(await eventually(async () => arrived(String(ping.json.delivery_id)).length === 2, 10_000), -1, 'sent again');
  const replayed = arrived(String(ping.json.delivery_id))[1]!;
  t.equal(replayed.body, got.body, 'the same body');
  t.ok(
    await verify(newSecret, replayed.body, String(replayed.headers['x-service-signature'])),
    'signed with the current secret',
  );
  t.ok(
    new Webhook(newSecret).verify(replayed.body, replayed.headers as Record<string, string>),
    'with a new timestamp and the same webhook-id',
  );
  t.equal(replayed.headers['webhook-id'], got.headers['webhook-id']);
  t.equal(
    (await call(base, 'POST', `/v1/webhooks/${id}/deliveries/dlv_000000000000000000000000/replay`, { token: owner }))
      .status,
    404,
  );
  const paged = await call(base, 'GET', `/v1/webhooks/${id}/deliveries?limit=1&offset=1`, { token: owner });
  t.equal((paged.body as unknown[]).length, 1);
  t.equal(paged.headers.get('x-total-count'), '3');
  const metrics = await call(base, 'GET', '/metrics');
  t.match(metrics.body, /darshak_webhook_attempts_total\{outcome="succeeded"\} [1-9]/, 'webhook outcomes in /metrics');
});

t.test(
  "a plan's cap on webhook endpoints: the sixth of a free tenant is refused; deleting one makes room",
  async (t) => {
    await makeTenant(prefix, 'small', 'free');
    const token = await login(base, 'owner@small.test');
    const make = (i: number) => create({ url: `${receiver.url}/small/${i}`, categories: ['qos.error_spike'] }, token);
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await make(i));
    t.ok(made.every((r) => r.status === 201));
    t.match(await make(5), { status: 403, json: { error: { code: 'limit_reached' } } });
    t.equal(
      (await call(base, 'GET', '/v1/webhooks', { token })).headers.get('x-total-count'),
      '5',
      'the refused one is not kept',
    );
    t.equal((await call(base, 'DELETE', `/v1/webhooks/${String(made[0]!.json.id)}`, { token })).status, 200);
    t.equal((await make(6)).status, 201);
  },
);
