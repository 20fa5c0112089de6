import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connect } from 'nats';
import {
  eventually,
  makeTenant,
  natsUrl,
  post,
  removeNamespace,
  uniquePrefix,
  freePort,
  darshak,
} from '../helpers/env.js';
import { autoEngine } from '../helpers/engines.js';

// `darshak start` as its own process, the way `npm start` runs it.

const ready = (port: number) => async (): Promise<boolean> => {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
  } catch {
    return false;
  }
};

t.test('start: serves ingest, logs its engine, stops cleanly on SIGTERM', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-data-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const p = darshak(['start'], {
    NATS_URL: natsUrl,
    NATS_PREFIX: prefix,
    DATA_DIR: dataDir,
    INGEST_PORT: String(port),
    BASE_PORT: String(await freePort()),
  });
  t.teardown(() => p.child.kill('SIGKILL'));
  t.not(await eventually(ready(port), 15_000, 100), -1, 'ready');
  t.match(
    p.output(),
    new RegExp(`"engine":"${autoEngine}".*"msg":"listening"`),
    `the engine in use (${autoEngine} here) is logged`,
  );
  const tenant = await makeTenant(prefix);
  const r = await post(
    `http://127.0.0.1:${port}/v1/ingest/events`,
    { events: [{ event_type: 'heartbeat', session_id: 's' }] },
    { 'x-api-key': tenant.key },
  );
  t.equal(r.status, 200);
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
  t.match(p.output(), /"msg":"stopped"/);
});

t.test('start --role ingest with HTTP_ENGINE=node', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const port = await freePort();
  const p = darshak(['start', '--role', 'ingest'], {
    NATS_URL: natsUrl,
    NATS_PREFIX: prefix,
    INGEST_PORT: String(port),
    HTTP_ENGINE: 'node',
  });
  t.teardown(() => p.child.kill('SIGKILL'));
  t.not(await eventually(ready(port), 15_000, 100), -1);
  t.match(p.output(), /"engine":"node"/);
  t.match(
    await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(),
    /darshak_http_engine_info\{listener="ingest",engine="node"\} 1/,
  );
  p.child.kill('SIGINT');
  t.equal(await p.exited, 0);
});

t.test(
  'unknown role, and unreachable NATS without autostart or for a subset of roles: a message and exit 1',
  async (t) => {
    const bad = darshak(['start', '--role', 'ingest,telepathy'], { NATS_URL: natsUrl, NATS_PREFIX: uniquePrefix() });
    t.equal(await bad.exited, 1);
    t.match(bad.output(), /unknown role "telepathy"; roles: all, ingest, aggregate, flush, alerts, api, webhooks/);
    const port = await freePort();
    const none = darshak(['start'], {
      NATS_URL: `nats://127.0.0.1:${port}`,
      NATS_AUTOSTART: 'false',
      INGEST_PORT: String(await freePort()),
    });
    t.equal(await none.exited, 1);
    t.match(none.output(), /Nothing answers at nats:\/\/127.0.0.1:\d+\. Start a NATS server with JetStream/);
    // A part of a distributed layout never runs a server of its own, even with autostart on: it says what is missing.
    const dataDir = mkdtempSync(join(tmpdir(), 'darshak-data-'));
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
    const role = darshak(['start', '--role', 'aggregate'], { NATS_URL: `nats://127.0.0.1:${port}`, DATA_DIR: dataDir });
    t.equal(await role.exited, 1);
    t.match(role.output(), /Nothing answers at nats:\/\/127.0.0.1:\d+\. Start a NATS server with JetStream/);
    t.notMatch(role.output(), /started a local nats-server/);
  },
);

t.test('with nothing at NATS_URL, start runs a nats-server under DATA_DIR/nats and stops it on exit', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-data-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const natsPort = await freePort();
  const port = await freePort();
  const url = `nats://127.0.0.1:${natsPort}`;
  const p = darshak(['start'], {
    NATS_URL: url,
    DATA_DIR: dataDir,
    INGEST_PORT: String(port),
    BASE_PORT: String(await freePort()),
  });
  t.teardown(() => p.child.kill('SIGKILL'));
  t.not(await eventually(ready(port), 20_000, 100), -1, 'ready on its own NATS');
  t.match(p.output(), /started a local nats-server/);
  // Never an open server: a generated user, kept private beside its store, which the CLI finds there too.
  await t.rejects(
    connect({ servers: url, reconnect: false }),
    /Authorization Violation/i,
    'no connection without credentials',
  );
  const credentials = join(dataDir, 'nats', 'credentials.json');
  t.equal(statSync(credentials).mode & 0o777, 0o600, 'its credentials file is 0600');
  const kept = JSON.parse(readFileSync(credentials, 'utf8')) as { user: string; password: string };
  t.ok(kept.password.length >= 32, 'a long random password');
  t.equal(statSync(join(dataDir, 'nats', 'nats.conf')).mode & 0o777, 0o600, 'and so is its config');
  const tenant = await makeTenant('darshak', 'local', 'pro', url, { DATA_DIR: dataDir });
  t.equal(
    (
      await post(
        `http://127.0.0.1:${port}/v1/ingest/events`,
        { events: [{ event_type: 'heartbeat', session_id: 's' }] },
        { 'x-api-key': tenant.key },
      )
    ).status,
    200,
    'the CLI and ingest work with it',
  );
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
  const stillUp = await new Promise<boolean>((resolve) => {
    const s = createServer()
      .once('error', () => resolve(true))
      .listen(natsPort, '127.0.0.1', () => s.close(() => resolve(false)));
  });
  t.equal(stillUp, false, 'the nats-server it started is gone');
});
