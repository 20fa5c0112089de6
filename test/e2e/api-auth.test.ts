import {
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
} from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, exportJWK, type JWTPayload } from 'jose';
import { connect } from 'nats';
import t, { type Test } from 'tap';
import { call, inOneMinute, login } from '../helpers/api.js';
import { olderHash } from '../helpers/passwords.js';
import { cli, eventually, makeTenant, natsUrl, post, startService } from '../helpers/env.js';

// Login, tokens, service accounts and API keys at {base_url}, driven over HTTP and the CLI as a user would.

// Its lockouts are waited out in real seconds: 90 s of a file alone, past tap's default 120 s on a loaded machine.
t.setTimeout(300_000);
const dataDir = mkdtempSync(join(tmpdir(), 'darshak-api-auth-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

// Shared with the second api process of the shared-rate test, which has a data directory of its own.
const jwksSecret = randomBytes(32).toString('hex');
const svc = await startService({ data_dir: dataDir, trust_proxy: true, jwks_secret: jwksSecret }, 'ingest,api');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
const prefix = svc.config.nats_prefix;
const acme = await makeTenant(prefix, 'acme', 'pro');
await makeTenant(prefix, 'other', 'pro');
const env = { NATS_PREFIX: prefix };
for (const [email, role] of [
  ['admin@acme.test', 'admin'],
  ['viewer@acme.test', 'viewer'],
] as const) {
  const r = await cli(
    ['user', 'add', '--tenant', 'acme', '--email', email, '--password', 'correct horse battery', '--role', role],
    env,
  );
  if (r.code !== 0) throw new Error(r.stderr);
}
const ownerToken = await login(base, 'owner@acme.test');

t.test('login answers the seed shape with a 24 h EdDSA token of the contract claims', async (t) => {
  const r = await call(base, 'POST', '/v1/auth/login', {
    body: { email: 'Owner@ACME.test', password: 'correct horse battery' },
  });
  t.equal(r.status, 200);
  t.match(r.json, {
    token_type: 'bearer',
    tenant_slug: 'acme',
    expires_in: 86400,
    user: { email: 'owner@acme.test', role: 'owner' },
  });
  t.type((r.json.user as { id: unknown }).id, 'number');
  const token = String(r.json.access_token);
  const header = decodeProtectedHeader(token);
  const claims = decodeJwt(token);
  t.equal(header.alg, 'EdDSA');
  t.match(claims, {
    tenant: 'acme',
    role: 'owner',
    scope: 'analytics:read alerts:write keys:manage settings:write',
    aud: 'darshak-api',
    iss: svc.config.public_base_url,
  });
  t.equal(claims.exp! - claims.iat!, 86400);
  t.type(claims.jti, 'string');
  const jwks = await call(base, 'GET', '/.well-known/jwks.json');
  const keys = (jwks.json.keys as Array<{ kid: string; kty: string; crv: string; d?: string }>) ?? [];
  t.ok(
    keys.some((k) => k.kid === header.kid && k.kty === 'OKP' && k.crv === 'Ed25519'),
    'the signing key is published',
  );
  t.notOk(
    keys.some((k) => k.d !== undefined),
    'no private part is published',
  );
  const viewer = decodeJwt(await login(base, 'viewer@acme.test'));
  t.equal(viewer.scope, 'analytics:read');
});

t.test('a key written to the jwks bucket by anyone who can reach NATS mints no token', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const exported = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(exported);
  const jwk = { ...exported, kid, alg: 'EdDSA', use: 'sig' };
  // The owner's claims, so that the token fails on its key alone (the control at the end shows it would pass).
  const owner = decodeJwt(ownerToken);
  const forge = () =>
    new SignJWT({ tenant: owner.tenant, role: owner.role, scope: owner.scope })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid })
      .setSubject(String(owner.sub))
      .setIssuer(svc.config.public_base_url)
      .setAudience('darshak-api')
      .setIssuedAt()
      .setNotBefore('0s')
      .setExpirationTime('1h')
      .setJti('forged')
      .sign(privateKey);
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const kv = await nc.jetstream().views.kv(`${prefix}_jwks`);
  const macUnder = (secret: string): string =>
    createHmac('sha256', secret)
      .update(JSON.stringify([jwk.kid, jwk.kty, jwk.crv, jwk.x, jwk.alg]))
      .digest('base64url');
  for (const [what, entry] of [
    ['a bare JWK', jwk],
    ['no MAC', { jwk }],
    ['a MAC under another secret', { jwk, mac: macUnder('guessed'.repeat(8)) }],
  ] as const) {
    await kv.put(kid, JSON.stringify(entry));
    await new Promise((r) => setTimeout(r, 200));
    const r = await call(base, 'GET', '/v1/api-keys', { token: await forge() });
    t.equal(r.status, 401, `${what}: refused`);
    const listed = (await call(base, 'GET', '/.well-known/jwks.json')).json.keys as Array<{ kid: string }>;
    t.notOk(
      listed.some((k) => k.kid === kid),
      `${what}: not published`,
    );
  }
  // The same key vouched for with the deployment's secret is trusted: the MAC is what decides.
  await kv.put(kid, JSON.stringify({ jwk, mac: macUnder(jwksSecret) }));
  t.not(
    await eventually(
      async () => (await call(base, 'GET', '/v1/api-keys', { token: await forge() })).status === 200,
      3000,
      100,
    ),
    -1,
    'vouched for, accepted',
  );
  await kv.delete(kid);
  t.not(
    await eventually(
      async () => (await call(base, 'GET', '/v1/api-keys', { token: await forge() })).status === 401,
      3000,
      100,
    ),
    -1,
    'removed, refused again',
  );
});

t.test('the api listener serves /healthz, /readyz, /metrics and its OpenAPI document', async (t) => {
  t.equal((await call(base, 'GET', '/healthz')).status, 200);
  const ready = await call(base, 'GET', '/readyz');
  t.equal(ready.status, 200);
  t.match(ready.json, { checks: { nats: true, clickhouse: true } });
  const metrics = await call(base, 'GET', '/metrics');
  t.match(metrics.body, /darshak_http_requests_total\{listener="base"/);
  const doc = await call(base, 'GET', '/v1/openapi.json');
  t.match(doc.json, { openapi: '3.1.0' });
  t.ok((doc.json.paths as Record<string, unknown>)['/v1/analytics/overview'], 'the API is in it');
});

t.test('wrong password and unknown e-mail get the same answer, and both pay for scrypt', async (t) => {
  const time = async (email: string): Promise<{ ms: number; body: Record<string, unknown>; status: number }> => {
    const start = performance.now();
    const r = await call(base, 'POST', '/v1/auth/login', { body: { email, password: 'wrong password!' } });
    return { ms: performance.now() - start, body: r.json, status: r.status };
  };
  const known: number[] = [];
  const unknown: number[] = [];
  for (let i = 0; i < 4; i++) {
    const a = await time('admin@acme.test');
    const b = await time(`nobody${i}@acme.test`);
    t.equal(a.status, 401);
    t.equal(b.status, 401);
    const strip = (body: Record<string, unknown>) => ({ ...(body.error as object), request_id: '' });
    t.same(strip(a.body), strip(b.body), 'the same code and message');
    known.push(a.ms);
    unknown.push(b.ms);
  }
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  // Not a timing test: an unknown e-mail answered without hashing would be about a hundred times faster.
  t.ok(
    median(unknown) > median(known) * 0.3,
    `unknown ${median(unknown).toFixed(1)} ms vs known ${median(known).toFixed(1)} ms`,
  );
});

t.test(
  'past 5 failures from one network, each attempt waits twice as long: a delay, not a lockout; others unaffected',
  async (t) => {
    const attempt = (password: string, headers: Record<string, string> = {}) =>
      call(base, 'POST', '/v1/auth/login', { body: { email: 'viewer@acme.test', password }, headers });
    for (let i = 0; i < 5; i++) t.equal((await attempt(`guess ${i} wrong`)).status, 401, `failure ${i + 1}, at once`);
    const early = await attempt('correct horse battery');
    t.match(
      early,
      { status: 429, json: { error: { code: 'too_many_attempts' } } },
      'the 6th at once waits, even with the right password',
    );
    t.equal(early.headers.get('retry-after'), '1', 'for 1 s');
    await new Promise((r) => setTimeout(r, 1100));
    t.equal((await attempt('guess 6 wrong')).status, 401, 'after it, tried');
    const second = await attempt('guess 7 wrong');
    t.equal(second.status, 429);
    t.equal(second.headers.get('retry-after'), '2', 'then 2 s');
    await new Promise((r) => setTimeout(r, 2100));
    t.equal(
      (await attempt('correct horse battery')).status,
      200,
      'the user who mistyped is in after seconds, not locked out',
    );
    const elsewhere = await attempt('correct horse battery', { 'x-forwarded-for': '198.51.100.7' });
    t.equal(elsewhere.status, 200, 'another network never waited');
  },
);

t.test('the delays double up to the 15-minute window', async (t) => {
  const from = { 'x-forwarded-for': '192.0.2.44' };
  const attempt = () =>
    call(base, 'POST', '/v1/auth/login', { body: { email: 'admin@acme.test', password: 'wrong' }, headers: from });
  const waits: number[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await attempt();
    if (r.status === 429) {
      const s = Number(r.headers.get('retry-after'));
      waits.push(s);
      await new Promise((res) => setTimeout(res, s * 1000 + 100));
    }
  }
  t.same(waits, [1, 2], 'after 5 failures: 1 s, then 2 s');
  t.equal((await attempt()).status, 401, 'the 2 s waited out, tried');
  const r = await attempt();
  t.equal(r.status, 429);
  t.equal(r.headers.get('retry-after'), '4', 'then 4 s: doubling');
});

t.test('attempts sent at once cannot pass the limit together', async (t) => {
  const from = { 'x-forwarded-for': '203.0.113.9' };
  const guesses = Array.from({ length: 20 }, (_, i) => ({ email: 'admin@acme.test', password: `wrong ${i}` }));
  const answers = await Promise.all(
    [...guesses, { email: 'admin@acme.test', password: 'correct horse battery' }].map((body) =>
      call(base, 'POST', '/v1/auth/login', { body, headers: from }),
    ),
  );
  const tried = answers.filter((a) => a.status === 401 || a.status === 200).length;
  t.ok(tried <= 5, `${tried} of 21 attempts sent at once were tried, at most 5`);
  t.equal(answers.filter((a) => a.status === 429).length, 21 - tried, 'the others were refused before any hashing');
});

t.test('one network trying many accounts is stopped after 50 failures', async (t) => {
  const from = { 'x-forwarded-for': '2001:4860:4860::8888' };
  const statuses: number[] = [];
  for (let i = 0; i < 50; i++)
    statuses.push(
      (
        await call(base, 'POST', '/v1/auth/login', {
          body: { email: `spray${i}@acme.test`, password: 'Summer2026!' },
          headers: from,
        })
      ).status,
    );
  t.same([...new Set(statuses)], [401]);
  const other = { 'x-forwarded-for': '2001:4860:4860::1' };
  t.equal(
    (
      await call(base, 'POST', '/v1/auth/login', {
        body: { email: 'spray-next@acme.test', password: 'Summer2026!' },
        headers: other,
      })
    ).status,
    429,
    'an IPv6 client counts by its /64',
  );
});

t.test('malformed login bodies are 400 with a clear code, never 5xx', async (t) => {
  for (const [body, code] of [
    ['{"email":', 'invalid_json'],
    ['[]', 'invalid_request'],
    ['{"email":"a@b.c"}', 'invalid_request'],
    ['{"email":1,"password":"x"}', 'invalid_request'],
    ['{"email":"a@b.c","password":"x","admin":true}', 'invalid_request'],
    [Buffer.from([0x7b, 0xff, 0x7d]).toString('latin1'), 'invalid_json'],
  ] as const) {
    const r = await call(base, 'POST', '/v1/auth/login', { body });
    t.equal(r.status, 400, body);
    t.match(r.json, { error: { code } }, body);
  }
  const long = await call(base, 'POST', '/v1/auth/login', {
    body: { email: `${'x'.repeat(300)}@acme.test`, password: 'p'.repeat(2000) },
  });
  t.equal(long.status, 401, 'an e-mail or password longer than any account can have is refused without hashing');
  const huge = await call(base, 'POST', '/v1/auth/login', {
    body: { email: 'x@acme.test', password: 'p'.repeat(200_000) },
  });
  t.equal(huge.status, 413, 'a body over the API cap');
});

t.test('forged and broken tokens are 401; missing scopes are 403 naming the scope', async (t) => {
  const pem = readFileSync(join(dataDir, 'keys', 'signing-key.pem'));
  const key = createPrivateKey(pem);
  const good = decodeJwt(ownerToken);
  const kid = decodeProtectedHeader(ownerToken).kid!;
  const now = Math.floor(Date.now() / 1000);
  const sign = (claims: JWTPayload, header: Record<string, unknown> = {}, signer = key) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', kid, ...header }).sign(signer);
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const [h, , s] = ownerToken.split('.');
  const publicDer = createPublicKey(key).export({ type: 'spki', format: 'der' });
  const hs256 = await new SignJWT(good).setProtectedHeader({ alg: 'HS256', kid }).sign(new Uint8Array(publicDer));
  const strangerKey = generateKeyPairSync('ed25519').privateKey;
  const cases: Array<[string, string | undefined]> = [
    ['no token', undefined],
    ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(good)}.`],
    ['HS256 keyed with the public key', hs256],
    ['unknown kid', await sign(good, { kid: 'not-a-key' })],
    ['signed by a stranger under our kid', await sign(good, {}, strangerKey)],
    ['expired', await sign({ ...good, iat: now - 90_000, nbf: now - 90_000, exp: now - 60 })],
    ['not yet valid', await sign({ ...good, nbf: now + 3600, exp: now + 7200 })],
    ['wrong aud', await sign({ ...good, aud: 'someone-else' })],
    ['wrong iss', await sign({ ...good, iss: 'https://evil.example' })],
    ['tampered payload', `${h}.${b64({ ...good, tenant: 'other' })}.${s}`],
    ['no tenant claim', await sign({ ...good, tenant: undefined })],
    ['user of another tenant claimed', await sign({ ...good, tenant: 'other' })],
    ['garbage', 'not.a.jwt'],
  ];
  for (const [name, token] of cases) {
    const r = await call(base, 'GET', '/v1/analytics/overview', token === undefined ? {} : { token });
    t.equal(r.status, 401, name);
    t.match(r.json, { error: { code: 'unauthorized' } }, name);
  }
  const basic = await call(base, 'GET', '/v1/analytics/overview', {
    headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
  });
  t.equal(basic.status, 401, 'not a bearer token');

  const viewer = await login(base, 'admin@acme.test')
    .then(() => login(base, 'owner@acme.test'))
    .then(async () => {
      // The viewer's failures above blocked its logins: make a fresh viewer.
      const r = await cli(
        [
          'user',
          'add',
          '--tenant',
          'acme',
          '--email',
          'viewer2@acme.test',
          '--password',
          'correct horse battery',
          '--role',
          'viewer',
        ],
        env,
      );
      t.equal(r.code, 0, r.stderr);
      return login(base, 'viewer2@acme.test');
    });
  for (const [method, path, scope] of [
    ['POST', '/v1/api-keys', 'keys:manage'],
    ['GET', '/v1/api-keys', 'keys:manage'],
    ['DELETE', `/v1/api-keys/${acme.keyId}`, 'keys:manage'],
    ['POST', '/v1/service-accounts', 'settings:write'],
    ['POST', '/v1/alerts/1/acknowledge', 'alerts:write'],
  ] as const) {
    const r = await call(base, method, path, {
      token: viewer,
      body: method === 'GET' ? undefined : { name: 'x', environment: 'production' },
    });
    t.equal(r.status, 403, `viewer ${method} ${path}`);
    t.match(r.json, { error: { code: 'insufficient_scope', message: new RegExp(scope) } });
  }
  const admin = await login(base, 'admin@acme.test');
  t.equal(
    (
      await call(base, 'POST', '/v1/service-accounts', {
        token: admin,
        body: { name: 'x', scopes: ['analytics:read'] },
      })
    ).status,
    403,
    'admins hold no settings:write',
  );
  t.equal((await call(base, 'GET', '/v1/analytics/devices', { token: viewer })).status, 200);
});

t.test('API keys: created once in plaintext, listed without it, revoked at once for ingest', async (t) => {
  const admin = await login(base, 'admin@acme.test');
  const created = await call(base, 'POST', '/v1/api-keys', {
    token: admin,
    body: { name: 'android app', environment: 'staging' },
  });
  t.equal(created.status, 201);
  t.match(created.json, {
    name: 'android app',
    environment: 'staging',
    scope: 'ingest:write',
    key: /^dk_stg_[0-9A-Za-z]{32}$/,
    prefix: /^dk_stg_/,
  });
  const key = String(created.json.key);
  const send = () =>
    post(
      `${svc.ingestUrl}/v1/ingest/events`,
      { events: [{ event_type: 'heartbeat', session_id: 's1', anonymous_id: 'a' }] },
      { 'x-api-key': key },
    );
  t.equal((await send()).status, 200, 'the new key ingests');
  const list = await call(base, 'GET', '/v1/api-keys', { token: admin });
  t.equal(list.status, 200);
  const listed = (list.body as Array<Record<string, unknown>>).find((k) => k.id === created.json.id);
  t.ok(listed, `listed: ${JSON.stringify(list.body)}`);
  t.notOk(JSON.stringify(list.body).includes(key), 'the plaintext is never listed');
  t.notOk(JSON.stringify(list.body).includes('key_hash'), 'nor its hash');
  t.equal(listed?.revoked_at, null);
  t.not(
    await eventually(
      async () => {
        const l = await call(base, 'GET', '/v1/api-keys', { token: admin });
        return (
          typeof (l.body as Array<Record<string, unknown>>).find((k) => k.id === created.json.id)?.last_used_at ===
          'string'
        );
      },
      3000,
      100,
    ),
    -1,
    'last_used_at is set after a use',
  );
  t.notOk(
    JSON.stringify(
      (await call(base, 'GET', '/v1/api-keys', { token: await login(base, 'owner@other.test') })).body,
    ).includes(String(created.json.id)),
    "another tenant's list does not show it",
  );

  t.equal(
    (
      await call(base, 'DELETE', `/v1/api-keys/${String(created.json.id)}`, {
        token: await login(base, 'owner@other.test'),
      })
    ).status,
    404,
    'another tenant cannot revoke it',
  );
  const revoked = await call(base, 'DELETE', `/v1/api-keys/${String(created.json.id)}`, { token: admin });
  t.equal(revoked.status, 200);
  t.match(revoked.json, { id: created.json.id, revoked_at: String });
  const ms = await eventually(async () => (await send()).status === 401, 1000, 10);
  t.not(ms, -1, `ingest refuses the revoked key within 1 s (${ms} ms)`);
  const again = await call(base, 'DELETE', `/v1/api-keys/${String(created.json.id)}`, { token: admin });
  t.same(again.json, revoked.json, 'revoking again answers the first revocation');

  const second = await call(base, 'POST', '/v1/api-keys', {
    token: admin,
    body: { name: 'web', environment: 'production' },
  });
  const byBody = await call(base, 'DELETE', '/v1/api-keys', { token: admin, body: { id: second.json.id } });
  t.equal(byBody.status, 200, 'DELETE /v1/api-keys with {"id"} as the seed writes it');
  t.equal((await call(base, 'DELETE', '/v1/api-keys/key_00000000000000000000', { token: admin })).status, 404);
  for (const body of [
    { name: 'x', environment: 'prod' },
    { name: '', environment: 'production' },
    { name: 'x' },
    { name: 'x', environment: 'production', scope: 'analytics:read' },
  ]) {
    const r = await call(base, 'POST', '/v1/api-keys', { token: admin, body });
    t.equal(r.status, 400, JSON.stringify(body));
    t.match(r.json, { error: { code: 'invalid_request' } });
  }
  const ingestKey = await call(base, 'GET', '/v1/analytics/overview', {
    headers: { authorization: `Bearer ${acme.key}` },
  });
  t.equal(ingestKey.status, 401, 'an API key reads no analytics');
});

t.test('service accounts: a 90-day token shown once, refused at once when revoked, in every api process', async (t) => {
  const created = await call(base, 'POST', '/v1/service-accounts', {
    token: ownerToken,
    body: { name: 'grafana', scopes: ['analytics:read'] },
  });
  t.equal(created.status, 201);
  const token = String(created.json.token);
  const claims = decodeJwt(token);
  t.equal(claims.exp! - claims.iat!, 90 * 86400);
  t.match(claims, { role: 'service_account', scope: 'analytics:read', tenant: 'acme', sub: created.json.id });
  t.equal((await call(base, 'GET', '/v1/analytics/devices', { token })).status, 200);
  t.equal((await call(base, 'GET', '/v1/api-keys', { token })).status, 403, 'only its scopes');
  const bad = await call(base, 'POST', '/v1/service-accounts', {
    token: ownerToken,
    body: { name: 'x', scopes: ['settings:write'] },
  });
  t.equal(bad.status, 400, 'no service account holds settings:write');
  const list = await call(base, 'GET', '/v1/service-accounts', { token: ownerToken });
  t.notOk(JSON.stringify(list.body).includes(token), 'the token is never listed');
  t.match(list.body, [{ id: created.json.id, name: 'grafana', scopes: ['analytics:read'], revoked_at: null }]);

  // A second api process with a data directory (and signing key) of its own accepts the same token.
  const second = await startSecondApi(t);
  t.equal(
    (await call(second, 'GET', '/v1/analytics/devices', { token })).status,
    200,
    'accepted by another api process',
  );
  const theirs = await login(second, 'owner@acme.test');
  t.not(decodeProtectedHeader(theirs).kid, decodeProtectedHeader(ownerToken).kid, 'which signs with its own key');
  t.equal(
    (await call(base, 'GET', '/v1/analytics/devices', { token: theirs })).status,
    200,
    'and whose tokens this one accepts',
  );

  const revoked = await call(base, 'DELETE', `/v1/service-accounts/${String(created.json.id)}`, { token: ownerToken });
  t.equal(revoked.status, 200);
  for (const url of [base, second]) {
    const ms = await eventually(
      async () => (await call(url, 'GET', '/v1/analytics/devices', { token })).status === 401,
      1000,
      10,
    );
    t.not(ms, -1, `refused by ${url === base ? 'this' : 'the other'} process within ${ms} ms`);
  }
});

t.test('the rate limit of a token is shared by every api process', async (t) => {
  const second = await startSecondApi(t);
  const token = await login(base, 'owner@other.test');
  const { firstHalf, seen, secondHalf, refused } = await inOneMinute(async () => {
    let firstHalf = 0;
    for (let i = 0; i < 150; i++)
      if ((await call(base, 'GET', '/v1/analytics/devices', { token })).status === 200) firstHalf++;
    // Counts are shared every USAGE_SYNC_MS (250 ms).
    await new Promise((r) => setTimeout(r, 800));
    const seen = await call(second, 'GET', '/v1/analytics/devices', { token });
    let secondHalf = seen.status === 200 ? 1 : 0;
    for (let i = 1; i < 150; i++)
      if ((await call(second, 'GET', '/v1/analytics/devices', { token })).status === 200) secondHalf++;
    await new Promise((r) => setTimeout(r, 800));
    const refused = await call(base, 'GET', '/v1/analytics/devices', { token });
    return { firstHalf, seen, secondHalf, refused };
  });
  t.equal(firstHalf, 150, 'the first process serves 150');
  t.equal(seen.headers.get('ratelimit-remaining'), '149', 'the other process knows of the first 150');
  t.equal(secondHalf, 150, 'the second serves the other 150');
  t.equal(refused.status, 429, 'the 301st request of the minute is refused, whichever process gets it');
});

async function startSecondApi(t: Test): Promise<string> {
  const { spawn } = await import('node:child_process');
  const { freePort, mainJs, ready } = await import('../helpers/env.js');
  const dir = mkdtempSync(join(tmpdir(), 'darshak-api2-'));
  const port = await freePort();
  const child = spawn(process.execPath, [mainJs, 'start', '--role', 'api'], {
    env: {
      ...process.env,
      NODE_ENV: 'test',
      NATS_URL: svc.config.nats_url,
      NATS_PREFIX: prefix,
      DATA_DIR: dir,
      BASE_PORT: String(port),
      PUBLIC_BASE_URL: svc.config.public_base_url,
      JWKS_SECRET: jwksSecret,
    },
    stdio: 'ignore',
  });
  t.teardown(async () => {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${port}`;
  if (!(await ready(url, 30_000))) throw new Error('second api process did not become ready');
  return url;
}

t.test(
  'signing out, everywhere and by a password change: the tokens are refused within a second on every api process',
  async (t) => {
    await makeTenant(prefix, 'leaver', 'pro');
    const email = 'owner@leaver.test';
    const second = await startSecondApi(t);
    const status = async (url: string, token: string): Promise<number> =>
      (await call(url, 'GET', '/v1/api-keys', { token })).status;
    const refusedWithin = async (token: string, ms = 1000): Promise<boolean> =>
      (await eventually(async () => (await status(second, token)) === 401, ms, 20)) >= 0;
    const a = await login(base, email);
    const b = await login(base, email);
    t.equal(await status(second, a), 200, 'the other process accepts the token');

    t.equal((await call(base, 'POST', '/v1/auth/logout', { token: a })).status, 204, 'sign out');
    t.ok(await refusedWithin(a), 'the signed-out token is refused by the other process within a second');
    t.equal(await status(base, a), 401, 'and by this one');
    t.equal(await status(second, b), 200, "the user's other token still works");

    const c = await login(base, email);
    t.equal(
      (await call(second, 'POST', '/v1/auth/logout-everywhere', { token: b })).status,
      204,
      'sign out everywhere',
    );
    t.ok((await refusedWithin(b)) && (await refusedWithin(c)), 'every earlier token is refused');
    t.equal(await status(base, c), 401);
    const d = await login(base, email);
    t.equal(await status(second, d), 200, 'a new sign-in works');

    const change = (token: string, body: unknown) => call(base, 'POST', '/v1/auth/password', { token, body });
    t.match(await change(d, { current_password: 'wrong password', new_password: 'a new long password' }), {
      status: 401,
      json: { error: { code: 'invalid_credentials' } },
    });
    t.match(await change(d, { current_password: 'correct horse battery', new_password: 'short' }), {
      status: 400,
      json: { error: { code: 'invalid_request' } },
    });
    t.equal(await status(second, d), 200, 'refused changes revoke nothing');
    const changed = await change(d, { current_password: 'correct horse battery', new_password: 'a new long password' });
    t.equal(changed.status, 200, 'password changed');
    const e = String(changed.json.access_token);
    t.ok(await refusedWithin(d), 'the token it was changed with is refused');
    t.not(
      await eventually(async () => (await status(second, e)) === 200, 1000, 20),
      -1,
      'the token it answered works everywhere',
    );
    t.equal(
      (await call(base, 'POST', '/v1/auth/login', { body: { email, password: 'correct horse battery' } })).status,
      401,
      'the old password is gone',
    );
    t.equal(
      (await call(base, 'POST', '/v1/auth/login', { body: { email, password: 'a new long password' } })).status,
      200,
      'the new one signs in',
    );

    const sa = await call(base, 'POST', '/v1/service-accounts', {
      token: e,
      body: { name: 'bot', scopes: ['analytics:read'] },
    });
    t.match(
      await call(base, 'POST', '/v1/auth/logout', { token: String(sa.json.token) }),
      { status: 400, json: { error: { code: 'invalid_request' } } },
      "a service account's token is revoked with the account instead",
    );

    const out = await cli(['user', 'sign-out', '--email', email], env);
    t.equal(out.code, 0, out.stderr);
    t.match(out.json, { email, signed_out_at: String });
    t.ok(await refusedWithin(e), "the operator's sign-out reaches every process");
    const unknown = await cli(['user', 'sign-out', '--email', 'nobody@leaver.test'], env);
    t.equal(unknown.code, 1);
    t.match(unknown.stderr, /no user with e-mail nobody@leaver.test \(not_found\)/);
  },
);

t.test(
  'a password hashed with older parameters is rehashed at the next sign-in, and its tokens stay valid',
  async (t) => {
    await makeTenant(prefix, 'legacy', 'pro');
    const token = await login(base, 'owner@legacy.test');
    const nc = await connect({ servers: natsUrl });
    t.teardown(() => nc.close());
    const users = await nc.jetstream().views.kv(`${prefix}_users`);
    const id = JSON.parse(
      new TextDecoder().decode(
        (await users.get(`email.${createHash('sha256').update('owner@legacy.test').digest('hex')}`))!.value,
      ),
    ) as { id: number };
    const record = async () =>
      JSON.parse(new TextDecoder().decode((await users.get(`user.${id.id}`))!.value)) as { password_hash: string };
    await users.put(
      `user.${id.id}`,
      JSON.stringify({ ...(await record()), password_hash: olderHash('correct horse battery') }),
    );
    t.match((await record()).password_hash, /^scrypt\$32768\$8\$1\$/);
    await new Promise((r) => setTimeout(r, 200));
    await login(base, 'owner@legacy.test');
    t.match((await record()).password_hash, /^scrypt\$32768\$8\$3\$/, 'rehashed at the current cost');
    await login(base, 'owner@legacy.test');
    t.equal((await call(base, 'GET', '/v1/api-keys', { token })).status, 200, 'the token from before still works');
  },
);

t.test(
  "a plan's caps on active API keys and service accounts: refused past them with limit_reached, even when raced",
  async (t) => {
    await makeTenant(prefix, 'capped', 'free');
    const owner = await login(base, 'owner@capped.test');
    const key = (name: string) =>
      call(base, 'POST', '/v1/api-keys', { token: owner, body: { name, environment: 'production' } });
    // makeTenant made one key; the free plan allows 10.
    for (let i = 2; i <= 10; i++) t.equal((await key(`k${i}`)).status, 201);
    const over = await key('k11');
    t.match(over, { status: 403, json: { error: { code: 'limit_reached' } } });
    t.match(
      String((over.json.error as { message: string }).message),
      /holds 10 active API keys, as many as the free plan allows/,
    );
    const listed = (await call(base, 'GET', '/v1/api-keys', { token: owner })).body as Array<{
      id: string;
      revoked_at: string | null;
    }>;
    t.equal(listed.length, 10, 'the refused key is not kept');
    t.equal((await call(base, 'DELETE', `/v1/api-keys/${listed[0]!.id}`, { token: owner })).status, 200);
    const raced = await Promise.all(Array.from({ length: 6 }, (_, i) => key(`race${i}`)));
    t.ok(raced.filter((r) => r.status === 201).length <= 1, 'six at once into one free place: at most one gets it');
    t.ok(
      raced.every(
        (r) => r.status === 201 || (r.status === 403 && (r.json.error as { code: string }).code === 'limit_reached'),
      ),
    );
    const after = (await call(base, 'GET', '/v1/api-keys', { token: owner })).body as Array<{
      revoked_at: string | null;
    }>;
    t.ok(after.filter((k) => k.revoked_at === null).length <= 10, 'never more than the cap active');
    const sa = (name: string) =>
      call(base, 'POST', '/v1/service-accounts', { token: owner, body: { name, scopes: ['analytics:read'] } });
    for (let i = 1; i <= 5; i++) t.equal((await sa(`s${i}`)).status, 201);
    t.match(
      await sa('s6'),
      { status: 403, json: { error: { code: 'limit_reached' } } },
      'five service accounts on the free plan',
    );
    const active = async (): Promise<number> =>
      ((await call(base, 'GET', '/v1/api-keys', { token: owner })).body as Array<{ revoked_at: string | null }>).filter(
        (k) => k.revoked_at === null,
      ).length;
    while ((await active()) < 10) t.equal((await key('fill')).status, 201);
    const viaCli = await cli(
      ['apikey', 'create', '--tenant', 'capped', '--name', 'cli', '--environment', 'production'],
      env,
    );
    t.equal(viaCli.code, 1, 'the CLI is held to the cap too');
    t.match(viaCli.stderr, /\(limit_reached\)/);
  },
);

t.test('a per-tenant API rate over all its tokens, beside the per-token one', async (t) => {
  await makeTenant(prefix, 'busy', 'free');
  const tokens = [
    await login(base, 'owner@busy.test'),
    await login(base, 'owner@busy.test'),
    await login(base, 'owner@busy.test'),
  ];
  const { served, refused } = await inOneMinute(async () => {
    let served = 0;
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 250 && !refused; i++) {
      for (const token of tokens) {
        const r = await call(base, 'GET', '/v1/api-keys', { token });
        if (r.status === 200) served++;
        else if (!refused) refused = r;
      }
    }
    return { served, refused };
  });
  t.ok(
    served >= 600 && served <= 610,
    `about 600 served in the minute over three tokens (${served}); each token alone stays under its 300`,
  );
  t.match(refused, { status: 429, json: { error: { code: 'rate_limited' } } });
  t.match(String((refused!.json.error as { message: string }).message), /600 requests per minute for this tenant/);
  t.equal(refused!.headers.get('ratelimit-limit'), '600');
  t.ok(Number(refused!.headers.get('retry-after')) >= 1);
});

t.test('a suspended tenant is suspended everywhere: sign-in, tokens, service accounts, keys; and back', async (t) => {
  await makeTenant(prefix, 'paused', 'pro');
  const owner = await login(base, 'owner@paused.test');
  const sa = await call(base, 'POST', '/v1/service-accounts', {
    token: owner,
    body: { name: 'grafana', scopes: ['analytics:read'] },
  });
  const saToken = String(sa.json.token);
  t.equal((await cli(['tenant', 'update', '--slug', 'paused', '--status', 'inactive'], env)).code, 0);
  const refused = async (): Promise<boolean> =>
    (await call(base, 'GET', '/v1/analytics/overview?range=24h', { token: owner })).status === 403;
  t.not(await eventually(refused, 5000, 50), -1, 'within a second or so of the change');
  for (const [method, path, token, body] of [
    ['GET', '/v1/analytics/overview?range=24h', owner, undefined],
    ['GET', '/v1/analytics/overview?range=24h', saToken, undefined],
    ['GET', '/v1/api-keys', owner, undefined],
    ['POST', '/v1/api-keys', owner, { name: 'new', environment: 'production' }],
    ['POST', '/v1/service-accounts', owner, { name: 'another', scopes: ['analytics:read'] }],
    ['GET', '/v1/webhooks', owner, undefined],
  ] as const) {
    const r = await call(base, method, path, { token, body });
    t.equal(r.status, 403, `${method} ${path}`);
    t.match(r.json, { error: { code: 'tenant_inactive' } });
  }
  const signIn = await call(base, 'POST', '/v1/auth/login', {
    body: { email: 'owner@paused.test', password: 'correct horse battery' },
  });
  t.match(signIn, { status: 403, json: { error: { code: 'tenant_inactive' } } }, 'the right password gets no token');
  const wrong = await call(base, 'POST', '/v1/auth/login', { body: { email: 'owner@paused.test', password: 'wrong' } });
  t.equal(wrong.status, 401, 'a wrong one learns nothing about the tenant');
  t.equal((await cli(['tenant', 'update', '--slug', 'paused', '--status', 'active'], env)).code, 0);
  t.not(await eventually(async () => !(await refused()), 5000, 50), -1, 'made active, it works again');
  t.equal(
    (
      await call(base, 'POST', '/v1/auth/login', {
        body: { email: 'owner@paused.test', password: 'correct horse battery' },
      })
    ).status,
    200,
  );
});
