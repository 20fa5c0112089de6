import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { compareWithOracle, sendScenario } from '../helpers/compare.js';
import { drained, eventually, makeTenant, startService } from '../helpers/env.js';
import { makeScenario } from '../helpers/scenario.js';

// The scenario (sessions with stalls, pauses, seeks, errors, ends and timeouts; late and duplicate events; billing;
// three tenants) sent through ingest, aggregated and flushed, then every §6 answer read from the store and compared
// with the oracle, exactly.

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
  t.not(await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200), -1, 'aggregated and flushed');
  await compareWithOracle(t, svc.started.services.get('store').client, scenario.expected, tenants);
});
