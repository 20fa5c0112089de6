import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { cli } from '../helpers/env.js';

function configDir(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'darshak-config-'));
  for (const [name, value] of Object.entries(files))
    writeFileSync(join(dir, name), typeof value === 'string' ? value : JSON.stringify(value));
  return dir;
}

const base = { ...(JSON.parse(JSON.stringify(loadConfig({ env: {} }))) as Record<string, unknown>) };

t.test('default.json < <NODE_ENV>.json < environment < overrides', async (t) => {
  const dir = configDir({ 'default.json': base, 'staging.json': { ingest_port: 9001, shards: 8 } });
  const c = loadConfig({
    dir,
    env: { NODE_ENV: 'staging', SHARDS: '16', TRUST_PROXY: 'yes', WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8, hooks.test' },
  });
  t.equal(c.ingest_port, 9001, 'from staging.json');
  t.equal(c.shards, 16, 'env beats the file');
  t.equal(c.trust_proxy, true);
  t.same(c.webhook_allow_hosts, ['127.0.0.0/8', 'hooks.test']);
  t.equal(loadConfig({ dir, env: { SHARDS: '16' }, overrides: { shards: 2 } }).shards, 2, 'overrides beat env');
  t.equal(
    loadConfig({ dir, env: { NODE_ENV: 'nosuchenv' } }).ingest_port,
    base.ingest_port,
    'a missing env file is fine',
  );
});

t.test('a bad value names its key', async (t) => {
  const dir = configDir({ 'default.json': base });
  t.throws(
    () => loadConfig({ dir, env: { INGEST_PORT: 'http' } }),
    /INGEST_PORT \(ingest_port\) must be an integer, got "http"/,
  );
  t.throws(() => loadConfig({ dir, env: { INGEST_PORT: '70000' } }), /INGEST_PORT \(ingest_port\) must be <= 65535/);
  t.throws(
    () => loadConfig({ dir, env: { TRUST_PROXY: 'maybe' } }),
    /TRUST_PROXY \(trust_proxy\) must be true or false/,
  );
  t.throws(
    () => loadConfig({ dir, env: { HTTP_ENGINE: 'apache' } }),
    /HTTP_ENGINE \(http_engine\) must be equal to one of the allowed values/,
  );
  t.throws(() => loadConfig({ dir, env: { NATS_URL: 'http://x' } }), /NATS_URL \(nats_url\) must match pattern/);
  t.throws(() => loadConfig({ dir, env: { NATS_PREFIX: 'Bad Prefix' } }), /NATS_PREFIX \(nats_prefix\)/);
  t.throws(
    () => loadConfig({ dir: configDir({ 'default.json': { ...base, colour: 'blue' } }), env: {} }),
    /colour must NOT have additional properties/,
  );
  t.throws(
    () => loadConfig({ dir: configDir({ 'default.json': '{oops' }), env: {} }),
    /default.json is not a JSON object/,
  );
});

t.test('bad combinations are refused', async (t) => {
  const dir = configDir({ 'default.json': base });
  t.throws(
    () => loadConfig({ dir, env: { BASE_PORT: '9000', INGEST_PORT: '9000' } }),
    /BASE_PORT \(base_port\) and INGEST_PORT \(ingest_port\) are both 9000/,
  );
  t.throws(
    () => loadConfig({ dir, env: { CLICKHOUSE_URL: 'tcp://ch:9000' } }),
    /CLICKHOUSE_URL \(clickhouse_url\) must be an http\(s\) URL/,
  );
  t.throws(
    () => loadConfig({ dir, env: { NATS_USER: 'ingest' } }),
    /NATS_USER \(nats_user\) and NATS_PASSWORD \(nats_password\) go together/,
  );
  t.throws(() => loadConfig({ dir, env: { NATS_PASSWORD: 'secret' } }), /go together/);
  t.throws(
    () => loadConfig({ dir, env: { NATS_USER: 'u', NATS_PASSWORD: 'p', NATS_TOKEN: 't' } }),
    /NATS_USER \(nats_user\) and NATS_TOKEN \(nats_token\) are each a way to sign in to NATS; set one/,
  );
  t.throws(
    () => loadConfig({ dir, env: { NATS_CREDS_FILE: 'a.creds', NATS_NKEY_FILE: 'seed' } }),
    /NATS_CREDS_FILE .* and NATS_NKEY_FILE .* set one/,
  );
  t.throws(
    () => loadConfig({ dir, env: { NATS_TLS_CERT_FILE: 'c.pem' } }),
    /NATS_TLS_CERT_FILE \(nats_tls_cert_file\) and NATS_TLS_KEY_FILE \(nats_tls_key_file\) go together/,
  );
  t.throws(
    () => loadConfig({ dir, env: { JWKS_SECRET: 'short' } }),
    /JWKS_SECRET \(jwks_secret\) must be at least 32 characters, got 5/,
  );
  t.doesNotThrow(
    () => loadConfig({ dir, env: { NATS_USER: 'u', NATS_PASSWORD: 'p', NATS_TLS_CA_FILE: 'ca.pem' } }),
    'a user over TLS',
  );
});

t.test('the process stops with the message and exit code 78', async (t) => {
  const r = await cli(['tenant', 'create', '--slug', 'x'], { SHARDS: 'many' });
  t.equal(r.code, 78);
  t.match(r.stderr, /SHARDS \(shards\) must be an integer, got "many"/);
  t.equal(r.stdout, '');
});
