import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { settle } from '../../bench/simulator/report.js';
import { simulate, type SimulationOptions, type SimulationResult } from '../../bench/simulator/run.js';
import { freePort, makeTenant, ready, removeNamespace, RoleProcesses, uniquePrefix } from '../helpers/env.js';

// The simulator drives the same simulated match (same seed, same first ball, so the same events at the same times)
// through two layouts on real NATS: `darshak start` as one process, and the distributed layout of separate
// processes (two ingest, two aggregators with two shards each, one flush+api+alerts with the embedded store). Each
// run's answers must equal the ground truth exactly, and therefore each other's.

t.setTimeout(360_000);

const minute = 60_000;
const durationMs = 8 * minute;
// Laid in the past, whole minutes, so both runs (one after the other) send events of the same instants.
const startAt = Math.floor(Date.now() / minute) * minute - durationMs - 2 * minute;

interface Layout {
  ingestUrls: string[];
  apiUrl: string;
}

async function run(t: Test, layout: (procs: RoleProcesses, dir: string) => Promise<Layout>): Promise<SimulationResult> {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const dir = mkdtempSync(join(tmpdir(), 'darshak-sim-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const procs = new RoleProcesses({ NATS_PREFIX: prefix }, t);
  t.teardown(() => procs.stopAll());
  const tenant = await makeTenant(prefix, 'final', 'enterprise');
  const urls = await layout(procs, dir);
  for (const url of [...urls.ingestUrls, urls.apiUrl]) t.ok(await ready(url, 30_000), `${url} ready`);
  const options: SimulationOptions = {
    ...urls,
    apiKey: tenant.key,
    tenant: 'final',
    email: 'owner@final.test',
    password: 'correct horse battery',
    viewers: 150,
    durationMs,
    speed: 16,
    seed: 2026,
    incidents: [],
    startAt,
    concurrency: 32,
    settleMs: 60_000,
    out: '',
  };
  const result = await simulate(options);
  t.equal(result.send.lost, 0, 'no request given up');
  t.equal(result.send.rejected, 0, 'every event valid');
  t.ok(result.send.accepted > 3000, `a real load: ${result.send.accepted} events, ${result.sessions} sessions`);
  for (const a of result.answers) t.same(a.differences, [], `${a.answer}: equal to the ground truth`);
  return result;
}

/**
 * An answer without what depends on when it was asked (the series' points outside the match), its numbers to 9
 * significant digits: sums taken in another order (other shards, other batches) differ in the last bits only.
 */
function comparable(r: SimulationResult, answer: string): unknown {
  const got = r.answers.find((a) => a.answer === answer)?.got as
    { points?: Array<{ ts: string; value: number }> } | undefined;
  if (!got?.points) return settle(got);
  return settle({
    ...got,
    points: got.points.filter((p) => Date.parse(p.ts) >= r.startAt && Date.parse(p.ts) <= r.endAt + minute),
  });
}

t.test(
  'one process, the box and the distributed layout give the same answers for the same simulated match',
  async (t) => {
    const oneBox = (boxProcesses: 'one' | 'roles') => async (procs: RoleProcesses, dir: string) => {
      const [ingest, base] = [await freePort(), await freePort()];
      procs.start([], {
        INGEST_PORT: String(ingest),
        BASE_PORT: String(base),
        DATA_DIR: dir,
        BOX_PROCESSES: boxProcesses,
      });
      return { ingestUrls: [`http://127.0.0.1:${ingest}`], apiUrl: `http://127.0.0.1:${base}` };
    };
    const single = await run(t, oneBox('one'));
    const box = await run(t, oneBox('roles'));
    const distributed = await run(t, async (procs, dir) => {
      const ingest = [await freePort(), await freePort()];
      const base = await freePort();
      ingest.forEach((port, i) =>
        procs.start(['--role', 'ingest'], { INGEST_PORT: String(port), DATA_DIR: join(dir, `ingest-${i}`) }),
      );
      procs.start(['--role', 'aggregate', '--shards', '0,1']);
      procs.start(['--role', 'aggregate', '--shards', '2,3']);
      procs.start(['--role', 'flush,api,alerts'], { BASE_PORT: String(base), DATA_DIR: join(dir, 'store') });
      return { ingestUrls: ingest.map((p) => `http://127.0.0.1:${p}`), apiUrl: `http://127.0.0.1:${base}` };
    });
    for (const [name, other] of [
      ['the box', box],
      ['distributed', distributed],
    ] as const) {
      t.equal(other.send.accepted, single.send.accepted, `${name}: the same events accepted`);
      for (const a of single.answers)
        t.same(
          comparable(other, a.answer),
          comparable(single, a.answer),
          `${a.answer}: the same in ${name} as in one process`,
        );
    }
  },
);
