import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, freePort, makeTenant, post, RoleProcesses, startService } from '../helpers/env.js';
import { PrivateNats } from '../../bench/private-nats.js';
import { Receiver } from '../../bench/webhook-receiver.js';

// The alerts role as separate processes: two of them, one holding the lease. The holder is killed with -9; the other
// takes over, reads the signals after the last checkpoint, and raises what came meanwhile, once. What was raised
// before the kill is not raised again. Then the same across a kill -9 and restart of the NATS server itself.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-alerts-dist-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const svc = await startService(
  { data_dir: dataDir, webhook_allow_hosts: ['127.0.0.0/8'] },
  'ingest,aggregate,webhooks',
);
t.teardown(() => svc.stop());
const receiver = await Receiver.start();
t.teardown(() => receiver.close());
const prefix = svc.config.nats_prefix;
const bus = svc.started.services.get('bus');

const procs = new RoleProcesses({ NATS_PREFIX: prefix, CHECKPOINT_INTERVAL_MS: '1000' }, t);
t.teardown(() => procs.stopAll());
const alerts = () => procs.start(['--role', 'alerts']);

/** The pid in the lease (`host/pid/random`), once someone holds it. */
async function leader(): Promise<number> {
  const kv = await bus.kv(bus.names.alertsLeaseBucket, 10_000);
  let pid = 0;
  await eventually(
    async () => {
      const e = await kv.get('leader');
      pid = e && e.operation === 'PUT' ? Number(e.string().split('/')[1]) : 0;
      return pid > 0;
    },
    20_000,
    100,
  );
  return pid;
}

t.test('kill -9 of the active alerts process: the standby takes over, nothing is lost or raised twice', async (t) => {
  const tenant = await makeTenant(prefix, 'acme', 'pro');
  await svc.started.services
    .get('control')
    .webhooks.create('acme', { url: `${receiver.url}/acme`, categories: ['content.new_release_detected'] });
  const procsStarted = [alerts(), alerts()];
  const first = await leader();
  t.ok(
    procsStarted.some((p) => p.pid === first),
    'one of the two holds the lease',
  );

  const play = (title: string) =>
    post(
      `${svc.ingestUrl}/v1/ingest/events`,
      {
        events: [
          {
            event_type: 'play_start',
            session_id: `s-${title}`,
            anonymous_id: 'v1',
            content_id: title,
            content_title: title,
          },
        ],
      },
      { 'x-api-key': tenant.key },
    );
  const releases = (title: string): number =>
    receiver.received.filter(
      (r) => r.path === '/acme' && (JSON.parse(r.body) as { data: { content_id: string } }).data.content_id === title,
    ).length;

  t.equal((await play('before')).status, 200);
  t.not(await eventually(async () => releases('before') === 1, 20_000, 100), -1, 'raised by the first process');
  // Past a checkpoint of the first process's state, so the take-over has one to start from.
  await new Promise((r) => setTimeout(r, 1500));

  const holder = procsStarted.find((p) => p.pid === first)!;
  await procs.stop(holder);
  t.equal((await play('during')).status, 200, 'an event arrives while nobody leads');
  t.not(
    await eventually(async () => releases('during') === 1, 40_000, 100),
    -1,
    'raised by the standby once it took over',
  );
  t.not(await leader(), first);
  await new Promise((r) => setTimeout(r, 3000));
  t.equal(releases('before'), 1, 'not raised again by the new process');
  t.equal(releases('during'), 1);
});

t.test(
  'NATS killed and restarted: the alerts role recovers by itself, raising what came after once and nothing twice',
  async (t) => {
    const natsDir = mkdtempSync(join(tmpdir(), 'darshak-alerts-nats-'));
    t.teardown(() => rmSync(natsDir, { recursive: true, force: true }));
    const nats = new PrivateNats(await freePort(true), natsDir);
    await nats.start();
    t.teardown(() => nats.kill());
    const own = await startService(
      {
        nats_url: nats.url,
        data_dir: mkdtempSync(join(tmpdir(), 'darshak-alerts-nr-')),
        webhook_allow_hosts: ['127.0.0.0/8'],
      },
      'ingest,aggregate,alerts,webhooks',
    );
    t.teardown(() => own.stop());
    const tenant = await makeTenant(own.config.nats_prefix, 'acme', 'pro', nats.url);
    await own.started.services
      .get('control')
      .webhooks.create('acme', { url: `${receiver.url}/restart`, categories: ['content.new_release_detected'] });
    const play = (title: string) =>
      post(
        `${own.ingestUrl}/v1/ingest/events`,
        { events: [{ event_type: 'play_start', session_id: `s-${title}`, anonymous_id: 'v1', content_id: title }] },
        { 'x-api-key': tenant.key },
      );
    const releases = (title: string): number =>
      receiver.received.filter(
        (r) =>
          r.path === '/restart' && (JSON.parse(r.body) as { data: { content_id: string } }).data.content_id === title,
      ).length;

    t.equal((await play('first')).status, 200);
    t.not(await eventually(async () => releases('first') === 1, 20_000, 100), -1);
    await nats.kill();
    await new Promise((r) => setTimeout(r, 1000));
    await nats.start();
    // Ingest answers again once it has reconnected; the title played then must come out, once.
    t.not(
      await eventually(async () => (await play('second').catch(() => ({ status: 0 }))).status === 200, 30_000, 500),
      -1,
      'ingest accepts again',
    );
    t.not(await eventually(async () => releases('second') >= 1, 60_000, 200), -1, 'raised after the restart');
    await new Promise((r) => setTimeout(r, 3000));
    t.equal(releases('second'), 1);
    t.equal(releases('first'), 1, 'not raised again after the restart');
  },
);
