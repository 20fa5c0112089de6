import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Bus } from '../../src/bus/bus.js';
import {
  natsAuthConfig,
  natsRoles,
  newNatsPassword,
  passwordVariable,
  type NatsRole,
} from '../../src/bus/permissions.js';
import { createLogger } from '../../src/log.js';
import { Store } from '../../src/store/store.js';
import { call, login } from '../helpers/api.js';
import { compareWithOracle, sendScenario, storeAnswers } from '../helpers/compare.js';
import { cli, drained, eventually, freePort, ready, RoleProcesses, uniquePrefix } from '../helpers/env.js';
import { PrivateNats } from '../../bench/private-nats.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { makeScenario } from '../helpers/scenario.js';

// NATS as a trust root (docs/security.md): a nats-server running the generated authorization block, every role its
// own process signed in as its own user. The whole pipeline must work with nothing refused, and each user must be
// refused what its role does not need.

const dir = mkdtempSync(join(tmpdir(), 'darshak-nats-auth-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const prefix = uniquePrefix();
const passwords = Object.fromEntries([...natsRoles, 'admin'].map((u) => [u, newNatsPassword()])) as Record<
  NatsRole | 'admin',
  string
>;
writeFileSync(join(dir, 'auth.conf'), natsAuthConfig(prefix));
const nats = new PrivateNats(await freePort(), join(dir, 'js'), ['-c', join(dir, 'auth.conf')], {
  user: 'admin',
  pass: passwords.admin,
  env: Object.fromEntries(Object.entries(passwords).map(([u, p]) => [passwordVariable(u as NatsRole), p])),
});
await nats.start();
t.teardown(() => nats.kill());
const as = (role: NatsRole): Record<string, string> => ({ NATS_USER: role, NATS_PASSWORD: passwords[role] });
const log = createLogger('silent');

t.test("without its credentials, or with another role's password, a role cannot connect", async (t) => {
  const procs = new RoleProcesses({ NATS_URL: nats.url, NATS_PREFIX: prefix }, t);
  for (const env of [{}, { NATS_USER: 'ingest', NATS_PASSWORD: passwords.api }] as Array<Record<string, string>>) {
    const p = procs.start(['--role', 'ingest'], { INGEST_PORT: String(await freePort()), ...env });
    const code = await new Promise((r) => p.once('exit', r));
    t.equal(code, 1, 'exits 1');
    t.match(procs.logs(), /refused to sign in .*NATS_USER and NATS_PASSWORD/, 'and says how to sign in');
  }
  await t.rejects(
    Bus.connect({ nats_url: nats.url, nats_prefix: prefix, nats_token: 'guess' }, log),
    /refused to sign in/,
  );
});

t.test(
  'every role its own process and NATS user: the pipeline, the api and webhooks work, and NATS refuses nothing',
  async (t) => {
    const procs = new RoleProcesses(
      { NATS_URL: nats.url, NATS_PREFIX: prefix, CHECKPOINT_INTERVAL_MS: '1000', WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8' },
      t,
    );
    t.teardown(() => procs.stopAll());
    const dirs = {
      flush: mkdtempSync(join(dir, 'flush-')),
      api: mkdtempSync(join(dir, 'api-')),
      webhooks: mkdtempSync(join(dir, 'webhooks-')),
    };
    const ingestPort = await freePort();
    const basePort = await freePort();
    const base = `http://127.0.0.1:${basePort}`;
    // The CLI runs with the api role's credentials (docs/security.md).
    const tenants = ['delta', 'echo'];
    const keys: Record<string, string> = {};
    for (const slug of tenants) {
      const env = { NATS_URL: nats.url, NATS_PREFIX: prefix, ...as('api') };
      const created = await cli(
        [
          'tenant',
          'create',
          '--slug',
          slug,
          '--name',
          slug,
          '--plan',
          'enterprise',
          '--owner-email',
          `owner@${slug}.test`,
          '--owner-password',
          'correct horse battery',
        ],
        env,
      );
      t.equal(created.code, 0, created.stderr);
      keys[slug] = String(
        (await cli(['apikey', 'create', '--tenant', slug, '--name', 'web', '--environment', 'production'], env)).json
          ?.key,
      );
    }
    procs.start(['--role', 'ingest'], { INGEST_PORT: String(ingestPort), ...as('ingest') });
    procs.start(['--role', 'aggregate'], as('aggregate'));
    const flusher = procs.start(['--role', 'flush'], { DATA_DIR: dirs.flush, ...as('flush') });
    procs.start(['--role', 'alerts'], as('alerts'));
    procs.start(['--role', 'webhooks'], { DATA_DIR: dirs.webhooks, ...as('webhooks') });
    procs.start(['--role', 'api'], {
      DATA_DIR: dirs.api,
      BASE_PORT: String(basePort),
      PUBLIC_BASE_URL: base,
      ...as('api'),
    });
    const ingestUrl = `http://127.0.0.1:${ingestPort}`;
    t.ok(await ready(ingestUrl, 30_000), 'ingest ready');
    t.ok(await ready(base, 30_000), 'api ready');

    const scenario = makeScenario({ seed: 5, tenants, now: Date.now(), sessionsPerTenant: 12 });
    await sendScenario(ingestUrl, scenario, keys);

    // The api role: sign-in, keys, a webhook endpoint and its test ping, delivered by the webhooks role.
    const receiver = await Receiver.start();
    t.teardown(() => receiver.close());
    const owner = await login(base, 'owner@delta.test');
    t.equal(
      (await call(base, 'POST', '/v1/api-keys', { token: owner, body: { name: 'second', environment: 'staging' } }))
        .status,
      201,
      'a key made through the API',
    );
    t.equal((await call(base, 'GET', '/v1/api-keys', { token: owner })).status, 200);
    const hook = await call(base, 'POST', '/v1/webhooks', {
      token: owner,
      body: { url: `${receiver.url}/hook`, categories: ['qos.error_spike'] },
    });
    t.equal(hook.status, 201, 'a webhook endpoint');
    t.equal((await call(base, 'POST', `/v1/webhooks/${String(hook.json.id)}/test`, { token: owner })).status, 202);
    t.not(await eventually(async () => receiver.received.length > 0, 20_000, 100), -1, 'the test ping is delivered');
    const logged = async (): Promise<boolean> =>
      (await call(base, 'GET', `/v1/webhooks/${String(hook.json.id)}/deliveries`, { token: owner })).headers.get(
        'x-total-count',
      ) === '1';
    t.not(await eventually(logged, 10_000, 100), -1, 'and its attempt logged');
    t.equal(
      (await call(base, 'DELETE', `/v1/webhooks/${String(hook.json.id)}`, { token: owner })).status,
      200,
      'deleted, with its log',
    );

    t.not(
      await eventually(
        () => drained(prefix, 4, { servers: nats.url, user: 'admin', pass: passwords.admin }),
        60_000,
        250,
      ),
      -1,
      'aggregated and flushed',
    );
    // Let alerts and checkpoints run a few rounds before looking for refusals.
    await new Promise((r) => setTimeout(r, 2500));
    await procs.stop(flusher, 'SIGTERM');
    const store = await Store.open({ clickhouse_url: '', data_dir: dirs.flush, events_retention_days: 400 }, log);
    t.teardown(() => store.close());
    await compareWithOracle(t, storeAnswers(store.client), scenario.expected, tenants);
    await procs.stopAll('SIGTERM');
    t.notMatch(nats.log, /Violation/, 'nats-server refused no role anything');
    t.notMatch(procs.logs(), /NATS refused|Permissions/i, 'no role saw a refusal');
  },
);

t.test('each user is refused what its role does not need', async (t) => {
  const bus = (role: NatsRole): Promise<Bus> =>
    Bus.connect({ nats_url: nats.url, nats_prefix: prefix, nats_user: role, nats_password: passwords[role] }, log);
  const ingest = await bus('ingest');
  t.teardown(() => ingest.close());
  const n = ingest.names;
  const js = ingest.nc.jetstream({ timeout: 2000 });
  await t.rejects(
    ingest.jsm.streams.getMessage(`KV_${n.usersBucket}`, { last_by_subj: `$KV.${n.usersBucket}.x` }),
    /permission|timeout/i,
    'ingest reads no password hash',
  );
  await t.rejects(js.publish(`$KV.${n.jwksBucket}.forged`, '{}'), /permission|timeout/i, 'ingest adds no signing key');
  await t.rejects(js.publish(n.rawSubject(0), 'x'), /permission|timeout/i, 'ingest writes no aggregator output');
  await t.rejects(ingest.jsm.streams.delete(n.eventsStream), /permission|timeout/i, 'ingest deletes no stream');
  await t.rejects(ingest.jsm.streams.purge(n.eventsStream), /permission|timeout/i, 'ingest purges no stream');
  const api = await bus('api');
  t.teardown(() => api.close());
  await t.rejects(
    api.nc.jetstream({ timeout: 2000 }).publish(n.eventsSubject(0), 'x'),
    /permission|timeout/i,
    'api writes no events',
  );
  const peek = api.nc.subscribe('_INBOX_ingest.>');
  await api.nc.flush().catch(() => undefined);
  t.not(
    await eventually(async () => /Subscription Violation.*_INBOX_ingest/.test(nats.log), 3000, 50),
    -1,
    "api cannot listen to ingest's replies",
  );
  peek.unsubscribe();
});

t.test(
  'over TLS with client certificates: the configured CA, certificate and key are used, and required',
  async (t) => {
    const tls = mkdtempSync(join(dir, 'tls-'));
    const sh = (cmd: string): void => {
      const r = spawnSync('sh', ['-c', cmd], { cwd: tls, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}`);
    };
    const ext = (name: string, text: string): string => (writeFileSync(join(tls, name), text), name);
    sh('openssl req -x509 -newkey ed25519 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca');
    const san = ext('san.ext', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    for (const who of ['server', 'client']) {
      sh(`openssl req -newkey ed25519 -nodes -keyout ${who}.key -out ${who}.csr -subj /CN=${who}`);
      sh(
        `openssl x509 -req -in ${who}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out ${who}.pem -days 1 -extfile ${san}`,
      );
    }
    writeFileSync(
      join(tls, 'tls.conf'),
      `tls { cert_file: "${join(tls, 'server.pem')}", key_file: "${join(tls, 'server.key')}", ca_file: "${join(tls, 'ca.pem')}", verify: true }\n`,
    );
    const secure = new PrivateNats(await freePort(), join(tls, 'js'), ['-c', join(tls, 'tls.conf')]);
    // Its readiness check speaks plain NATS, which this server refuses: wait for the port instead.
    secure.launch();
    t.teardown(() => secure.kill());
    const url = `tls://127.0.0.1:${secure.port}`;
    const files = {
      nats_tls_ca_file: join(tls, 'ca.pem'),
      nats_tls_cert_file: join(tls, 'client.pem'),
      nats_tls_key_file: join(tls, 'client.key'),
    };
    const open = (extra: Partial<typeof files>) => Bus.connect({ nats_url: url, nats_prefix: prefix, ...extra }, log);
    let bus: Bus | undefined;
    t.not(
      await eventually(async () => (bus = await open(files).catch(() => undefined)) !== undefined, 10_000, 200),
      -1,
      'connects with the CA and a client certificate',
    );
    t.teardown(() => bus?.close());
    t.ok(bus?.nc.info?.tls_required, 'the connection is TLS');
    await t.rejects(open({ nats_tls_ca_file: files.nats_tls_ca_file }), 'refused without a client certificate');
    await t.rejects(
      open({ nats_tls_cert_file: files.nats_tls_cert_file, nats_tls_key_file: files.nats_tls_key_file }),
      "refused when the server's CA is not the trusted one",
    );
  },
);
