import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { login } from '../helpers/api.js';
import { compareWithOracle, httpAnswers, sendScenario } from '../helpers/compare.js';
import { cli, drained, eventually, makeTenant, startService } from '../helpers/env.js';
import { makeScenario } from '../helpers/scenario.js';

// The scenario (sessions with stalls, pauses, seeks, errors, ends and timeouts; late and duplicate events; billing;
// three tenants) sent through ingest, aggregated and flushed, then every §6 answer asked of the API over HTTP, each
// tenant with its owner's token, and compared with the oracle, exactly: a client's whole path.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-metrics-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

t.test('all roles in one process: every answer equals the oracle', async (t) => {
  const svc = await startService({ data_dir: dataDir }, 'all');
  t.teardown(() => svc.stop());
  const tenants = ['alpha', 'bravo', 'charlie'];
  const keys: Record<string, string> = {};
  for (const slug of tenants) keys[slug] = (await makeTenant(svc.config.nats_prefix, slug, 'enterprise')).key;
  const scenario = makeScenario({ seed: 7, tenants, now: Date.now(), sessionsPerTenant: 40 });
  await sendScenario(svc.ingestUrl, scenario, keys);
  t.not(
    await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200),
    -1,
    'aggregated and flushed',
  );
  const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
  const tokens: Record<string, string> = {};
  for (const slug of tenants) tokens[slug] = await login(base, `owner@${slug}.test`);
  const answers = httpAnswers(base, tokens);
  await compareWithOracle(t, answers, scenario.expected, tenants);
  const client = svc.started.services.get('store').client;

  // Damage the snapshots of the last few hours (as a wrong metric definition would), then replay: the answers are
  // those of the oracle again. The range's edges cut through sessions, which replay takes whole.
  const to = Math.floor(Date.now() / 60_000) * 60_000 + 60_000;
  const from = to - 5 * 3_600_000 - 17 * 60_000;
  for (const query of [
    `INSERT INTO watch_time_minutes VALUES ('alpha', toDateTime(${(to - 3_600_000) / 1000}), 3600000, 0)`,
    `DELETE FROM concurrency_seconds WHERE tenant = 'alpha' AND ts >= toDateTime(${from / 1000}) AND ts < toDateTime(${to / 1000})`,
    `DELETE FROM session_hours WHERE tenant = 'alpha' AND last_ts >= fromUnixTimestamp64Milli(${from})`,
    `DELETE FROM qos_minutes WHERE tenant = 'alpha'`,
  ]) {
    await client.command({ query });
  }
  const r = await cli(
    ['replay', '--tenant', 'alpha', '--from', new Date(from).toISOString(), '--to', new Date(to).toISOString()],
    { NATS_PREFIX: svc.config.nats_prefix },
  );
  t.equal(r.code, 0, r.stderr);
  const bad = await cli(['replay', '--tenant', 'alpha', '--from', '2026-11-20T10:00:30Z', '--to', '2026-11-21'], {
    NATS_PREFIX: svc.config.nats_prefix,
  });
  t.equal(bad.code, 2, 'a range off whole minutes is a usage error');
  t.match(bad.stderr, /whole minutes/);
  t.ok(Number(r.json?.sessions) > 0, `replayed ${String(r.json?.sessions)} sessions, ${String(r.json?.events)} events`);
  // qos_minutes lost everything older than the range too: replay the rest of history in one more call.
  const older = await cli(
    [
      'replay',
      '--tenant',
      'alpha',
      '--from',
      new Date(to - 60 * 86_400_000).toISOString(),
      '--to',
      new Date(from).toISOString(),
    ],
    { NATS_PREFIX: svc.config.nats_prefix },
  );
  t.equal(older.code, 0, older.stderr);
  await compareWithOracle(t, answers, scenario.expected, tenants);
});
