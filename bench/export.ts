// Parquet export benchmark (issue 6): a month of generated events (bench/query-data.ts) in an embedded store of its
// own, then the bench tenant's 31 days exported with writeParquet, the export job's own code. Prints rows/s and bytes
// per million events, and the export's speed as a share of a bare scan of the same rows in the same run.
// Usage: npm run bench:export [-- --events 10000000]

import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../src/log.js';
import { writeParquet } from '../src/store/export.js';
import { Store } from '../src/store/store.js';
import { benchTenant, eventsPerSession, insertSessions, selectRows, type Plan } from './query-data.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const target = arg('events', 10_000_000);
const runs = arg('runs', 3);
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const day = 86_400_000;

const dir = mkdtempSync(join(tmpdir(), 'darshak-bench-export-'));
const store = await Store.open(
  { clickhouse_url: '', data_dir: dir, events_retention_days: 3650 },
  createLogger('warn'),
);
try {
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}, ${process.platform}`,
  );
  const client = store.client;
  const nowMs = Math.floor(Date.now() / 60_000) * 60_000;
  const perSession = await eventsPerSession(client, { sessions: 0, users: 1000, anons: 1000, nowMs });
  // The bench tenant gets 90% of the sessions: generate enough that its share is the target.
  const sessions = Math.ceil(target / 0.9 / perSession);
  const plan: Plan = {
    sessions,
    users: Math.max(1000, Math.round(sessions / 4)),
    anons: Math.max(1000, Math.round(sessions / 2.5)),
    nowMs,
  };
  const chunk = Math.max(1, Math.round(2_000_000 / perSession));
  let t0 = performance.now();
  for (let first = 0; first < sessions; first += chunk)
    await insertSessions(client, plan, first, Math.min(chunk, sessions - first));
  await client.command({ query: 'OPTIMIZE TABLE events FINAL' });
  const [count] = await selectRows<{ n: string }>(client, 'SELECT countIf(tenant = {t:String}) AS n FROM events', {
    t: benchTenant,
  });
  console.log(
    `loaded ${fmt(Number(count!.n))} events of tenant ${benchTenant} in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );

  const filter = {
    tenant: benchTenant,
    fromMs: Math.floor(nowMs / day) * day - 30 * day,
    toMs: Math.floor(nowMs / day) * day + day,
    eventTypes: [],
  };
  const results: Array<{ s: number; rows: number; bytes: number }> = [];
  for (let i = 0; i < runs; i++) {
    const path = join(dir, `run-${i}.parquet`);
    t0 = performance.now();
    const r = await writeParquet(client, filter, path);
    const s = (performance.now() - t0) / 1000;
    results.push({ s, ...r });
    console.log(
      `run ${i + 1}: ${fmt(r.rows)} rows, ${fmt(r.bytes)} bytes in ${s.toFixed(2)} s = ${fmt(r.rows / s)} rows/s; rss ${fmt(process.memoryUsage().rss / 2 ** 20)} MiB`,
    );
    rmSync(path);
  }
  // In the same run, the floor: the store reading the same rows in the same order and throwing them away.
  const scans: number[] = [];
  for (let i = 0; i < runs; i++) {
    t0 = performance.now();
    await client.command({
      query: `SELECT * FROM events WHERE tenant = {t:String} AND ts >= toDateTime64({f:Float64}, 3, 'UTC') AND ts < toDateTime64({to:Float64}, 3, 'UTC') ORDER BY ts FORMAT Null`,
      query_params: { t: benchTenant, f: filter.fromMs / 1000, to: filter.toMs / 1000 },
    });
    scans.push((performance.now() - t0) / 1000);
  }
  const scan = [...scans].sort((a, b) => a - b)[Math.floor(scans.length / 2)]!;
  const best = results.reduce((a, b) => (b.s < a.s ? b : a));
  const median = [...results].sort((a, b) => a.s - b.s)[Math.floor(results.length / 2)]!;
  console.log(`\nrows/s: median ${fmt(median.rows / median.s)}, best ${fmt(best.rows / best.s)} (target ≥ 1,000,000)`);
  console.log(
    `bare scan of the same rows (SELECT * … ORDER BY ts FORMAT Null): median ${fmt(median.rows / scan)} rows/s; the export runs at ${((scan / median.s) * 100).toFixed(0)}% of it`,
  );
  console.log(
    `file size: ${(best.bytes / 2 ** 20).toFixed(1)} MiB, ${(((best.bytes / best.rows) * 1e6) / 2 ** 20).toFixed(1)} MiB per million events (snappy)`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
