import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { processTree } from '../../bench/host.js';
import { call, login } from '../helpers/api.js';
import {
  eventually,
  darshak,
  freePort,
  makeTenant,
  natsUrl,
  post,
  ready,
  removeNamespace,
  uniquePrefix,
  type DarshakProcess,
} from '../helpers/env.js';

// `darshak start` with every role on one box (BOX_PROCESSES=roles, the default): a supervisor and a child process per
// group of roles (src/cli/box.ts), driven as an operator would: signals, kill -9, /metrics, the API.

const startBox = (env: Record<string, string>): DarshakProcess => darshak(['start'], { NATS_URL: natsUrl, ...env });

/** The supervisor's children: pid and the roles each runs. */
const children = (pid: number): Array<{ pid: number; roles: string }> =>
  processTree(pid)
    .slice(1)
    .map((p) => ({ pid: p.pid, roles: /--role (\S+)/.exec(p.command)?.[1] ?? '' }));

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function setUp(t: Test): Promise<{ env: Record<string, string>; ingest: string; base: string }> {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-box-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const [ingestPort, basePort] = [await freePort(), await freePort()];
  return {
    env: { NATS_PREFIX: prefix, DATA_DIR: dataDir, INGEST_PORT: String(ingestPort), BASE_PORT: String(basePort) },
    ingest: `http://127.0.0.1:${ingestPort}`,
    base: `http://127.0.0.1:${basePort}`,
  };
}

const started = (box: DarshakProcess) => async (): Promise<boolean> => /"msg":"darshak started"/.test(box.output());

/** `n` sessions that start and show their first frame, in one batch. */
const sessions = (from: number, n: number): unknown => ({
  events: Array.from({ length: n }, (_, i) => [
    { event_type: 'play_start', session_id: `s${from + i}`, content_id: 'final', anonymous_id: `a${from + i}` },
    { event_type: 'first_frame', session_id: `s${from + i}`, content_id: 'final', anonymous_id: `a${from + i}` },
  ]).flat(),
});

/** Sessions started, as GET /v1/analytics/qos sums them (a sum table: a batch stored twice would count twice). */
async function sessionsStarted(base: string, token: string): Promise<number> {
  const r = await call(base, 'GET', '/v1/analytics/qos?range=24h', { token });
  return (r.body as Array<{ sessions_started: number }>).reduce((a, q) => a + q.sessions_started, 0);
}

t.test('every role as a child process: one /metrics for the box, and a SIGTERM stops them in order', async (t) => {
  const { env, ingest, base } = await setUp(t);
  const box = startBox(env);
  t.teardown(() => box.child.kill('SIGKILL'));
  t.not(await eventually(started(box), 30_000, 100), -1, 'started');
  const kids = children(box.child.pid!);
  t.same(
    kids.map((k) => k.roles),
    ['ingest', 'aggregate', 'flush,api,alerts,webhooks'],
    'ingest, the aggregators and the store roles each in a process',
  );
  t.ok(await ready(ingest), 'ingest ready');
  t.ok(await ready(base), 'api ready');
  const tenant = await makeTenant(env.NATS_PREFIX!, 'acme', 'pro', natsUrl, { DATA_DIR: env.DATA_DIR! });
  t.equal((await post(`${ingest}/v1/ingest/events`, sessions(0, 3), { 'x-api-key': tenant.key })).status, 200);
  // Counters of three processes on either listener: ingest's, the aggregators', the flusher's.
  for (const url of [ingest, base]) {
    const seen = await eventually(
      async () => {
        const text = await (await fetch(`${url}/metrics`)).text();
        return (
          /darshak_ingest_events_total\{[^}]*outcome="accepted"[^}]*\} 6\b/.test(text) &&
          /darshak_aggregate_events_total\{[^}]*outcome="passed"[^}]*\} 6\b/.test(text) &&
          /darshak_flush_rows_total\{table="events"\} 6\b/.test(text)
        );
      },
      15_000,
      200,
    );
    t.not(seen, -1, `${url}/metrics counts the box's processes`);
  }
  box.child.kill('SIGTERM');
  t.equal(await box.exited, 0, 'exit 0');
  for (const k of kids) t.notOk(alive(k.pid), `${k.roles} exited`);
  // Each child's own "stopped" line, in the order they were asked: ingest, then the aggregators, then the store.
  const stops = [...box.output().matchAll(/"pid":(\d+),"msg":"stopped"/g)].map((m) => Number(m[1]));
  t.same(stops, [...kids.map((k) => k.pid), box.child.pid], 'stopped in order, the supervisor last');
});

t.test('a child killed with -9 stops the box with the reason and exit 1', async (t) => {
  const { env } = await setUp(t);
  const box = startBox(env);
  t.teardown(() => box.child.kill('SIGKILL'));
  t.not(await eventually(started(box), 30_000, 100), -1, 'started');
  const kids = children(box.child.pid!);
  process.kill(kids.find((k) => k.roles === 'aggregate')!.pid, 'SIGKILL');
  t.equal(await box.exited, 1);
  t.match(box.output(), /the aggregate process of the box exited \(SIGKILL\); the others were stopped/);
  for (const k of kids) t.notOk(alive(k.pid), `${k.roles} is not left running`);
});

t.test('the supervisor killed with -9: its children go too, and a restart loses and doubles nothing', async (t) => {
  const { env, ingest, base } = await setUp(t);
  const first = startBox(env);
  t.teardown(() => first.child.kill('SIGKILL'));
  t.not(await eventually(started(first), 30_000, 100), -1, 'started');
  const tenant = await makeTenant(env.NATS_PREFIX!, 'acme', 'pro', natsUrl, { DATA_DIR: env.DATA_DIR! });
  const token = await login(base, 'owner@acme.test');
  t.equal((await post(`${ingest}/v1/ingest/events`, sessions(0, 40), { 'x-api-key': tenant.key })).status, 200);
  t.not(await eventually(async () => (await sessionsStarted(base, token)) === 40, 15_000, 200), -1, '40 stored');
  // Accepted and not yet stored when the kill comes.
  t.equal((await post(`${ingest}/v1/ingest/events`, sessions(40, 40), { 'x-api-key': tenant.key })).status, 200);
  const kids = children(first.child.pid!);
  first.child.kill('SIGKILL');
  await first.exited;
  t.not(
    await eventually(async () => kids.every((k) => !alive(k.pid)), 5000, 50),
    -1,
    'no role outlives the supervisor',
  );
  const second = startBox(env);
  t.teardown(() => second.child.kill('SIGKILL'));
  t.not(await eventually(started(second), 30_000, 100), -1, 'started again on the same DATA_DIR and ports');
  const again = await login(base, 'owner@acme.test');
  t.not(await eventually(async () => (await sessionsStarted(base, again)) === 80, 20_000, 200), -1, '80 stored');
  await new Promise((r) => setTimeout(r, 3000));
  t.equal(await sessionsStarted(base, again), 80, 'and no more: nothing stored twice');
  second.child.kill('SIGTERM');
  t.equal(await second.exited, 0);
});
