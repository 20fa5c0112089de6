import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { Store } from '../../src/store/store.js';
import { compareWithOracle, storeAnswers, sendScenario } from '../helpers/compare.js';
import {
  cli,
  drained,
  eventually,
  freePort,
  makeTenant,
  ready,
  removeNamespace,
  RoleProcesses,
  uniquePrefix,
} from '../helpers/env.js';
import { makeScenario, type Scenario } from '../helpers/scenario.js';

// The distributed layout: ingest, two aggregator processes (shards 0,1 and 2,3) and a flusher, each its own
// process. Each aggregator and the flusher is killed with -9 mid-stream and started again; the answers must still
// equal the oracle's (and so those of `darshak start`, which test/e2e/metrics.test.ts holds to the same oracle).

t.test('two aggregator processes and a flusher, each killed -9 mid-stream: the answers equal the oracle', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const tenants = ['delta', 'echo'];
  const keys: Record<string, string> = {};
  for (const slug of tenants) keys[slug] = (await makeTenant(prefix, slug, 'enterprise')).key;
  const ingestPort = await freePort();
  const dirs = [mkdtempSync(join(tmpdir(), 'darshak-ding-')), mkdtempSync(join(tmpdir(), 'darshak-dfl-'))] as const;
  t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  // Checkpoints every second, so restarts load one and replay only after it.
  const procs = new RoleProcesses({ NATS_PREFIX: prefix, CHECKPOINT_INTERVAL_MS: '1000' }, t);
  t.teardown(() => procs.stopAll());
  const role = (args: string[], extra: Record<string, string> = {}) => procs.start(args, extra);
  role(['--role', 'ingest'], { INGEST_PORT: String(ingestPort), DATA_DIR: dirs[0] });
  const aggregators = [
    role(['--role', 'aggregate', '--shards', '0,1']),
    role(['--role', 'aggregate', '--shards', '2,3']),
  ];
  let flusher = role(['--role', 'flush'], { DATA_DIR: dirs[1] });
  const ingestUrl = `http://127.0.0.1:${ingestPort}`;
  t.ok(await ready(ingestUrl));

  const kill9 = (p: ReturnType<typeof role>) => procs.stop(p);
  const scenario = makeScenario({ seed: 11, tenants, now: Date.now(), sessionsPerTenant: 30 });
  const third = Math.ceil(scenario.batches.length / 3);
  const part = (i: number): Scenario => ({ ...scenario, batches: scenario.batches.slice(i * third, (i + 1) * third) });
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  await sendScenario(ingestUrl, part(0), keys);
  await pause(1500);
  // Mid-stream: the second third is on its way while the first aggregator dies, then the flusher.
  const sending = sendScenario(ingestUrl, part(1), keys);
  await kill9(aggregators[0]!);
  aggregators[0] = role(['--role', 'aggregate', '--shards', '0,1']);
  await pause(300);
  await kill9(flusher);
  flusher = role(['--role', 'flush'], { DATA_DIR: dirs[1] });
  await sending;
  const last = sendScenario(ingestUrl, part(2), keys);
  await pause(200);
  await kill9(aggregators[1]!);
  aggregators[1] = role(['--role', 'aggregate', '--shards', '2,3']);
  await last;

  t.not(await eventually(() => drained(prefix), 60_000, 250), -1, 'aggregated and flushed');
  await procs.stop(flusher, 'SIGTERM');
  // With no flush role running, `darshak replay` opens the store itself; replaying all history changes nothing.
  const to = Math.floor(Date.now() / 60_000) * 60_000 + 60_000;
  const replay = await cli(
    [
      'replay',
      '--tenant',
      'delta',
      '--from',
      new Date(to - 60 * 86_400_000).toISOString(),
      '--to',
      new Date(to).toISOString(),
    ],
    {
      NATS_PREFIX: prefix,
      DATA_DIR: dirs[1],
    },
  );
  t.equal(replay.code, 0, replay.stderr);
  const store = await Store.open(
    { clickhouse_url: '', data_dir: dirs[1], events_retention_days: 400 },
    createLogger('silent'),
  );
  t.teardown(() => store.close());
  await compareWithOracle(t, storeAnswers(store.client), scenario.expected, tenants);
  if (!t.passing()) {
    // Which sessions the store lacks a row of, to tell a row lost from one counted wrong (the logs follow).
    const stored = await store.client.query({
      query: 'SELECT DISTINCT tenant, session_id FROM session_hours',
      format: 'JSONEachRow',
    });
    const have = new Set(
      (await stored.json<{ tenant: string; session_id: string }>()).map((r) => `${r.tenant} ${r.session_id}`),
    );
    const missing = new Set(
      scenario.expected
        .filter((e) => e.session_id !== undefined && !have.has(`${e.tenant} ${e.session_id}`))
        .map((e) => `${e.tenant} ${e.session_id}`),
    );
    t.comment(`sessions without a session_hours row: ${[...missing].join(', ') || 'none'}`);
  }
});
