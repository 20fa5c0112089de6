// Query benchmark (npm run bench:query): latency of the analytics answers at 10M and 100M stored events.
//
// For each size, in a process of its own (chDB binds one data directory per process):
// 1. Load: a month of a live cricket tournament (bench/query-data.ts) generated inside ClickHouse into `events` of an
//    embedded store (Store.open, DATA_DIR <data-dir>/events-<N>), then the pipelines' snapshot tables derived from
//    those events with SQL. Reused when the directory already holds the requested size.
// 2. Raw: each answer computed from `events` alone with SQL (bench/query-data.ts raw*), a few times (they are
//    slow), each bounded by max_execution_time. In the same pass, the answer of src/store/queries at the same `now`
//    is compared with the raw one: both follow docs/metrics.md, so they should agree.
// 3. API: the same answers over HTTP from `darshak start --role api` on that data directory (the store is closed
//    first), timed one request at a time with fetch; or, with --direct (or before the api role exists), the
//    src/store/queries functions called in-process.
// 4. Session recall: a whole session's stored events read back as an aggregator asks for them after a late event
//    (src/store/events.ts sessionHistory), with the `session_id` skip index and without it.
//
// The machine is often shared (2 cores): before each endpoint is timed, the script waits (up to --quiet-wait s) until
// the whole machine's CPU, sampled over a second while this run is idle, is at most --max-busy percent busy, and
// prints what it found.
//
//   npm run bench:query [-- --events 10000000,100000000 --data-dir DIR --keep --reps 30 --raw-reps 3
//                           --raw-timeout 120 --ranges 24h,30d --direct --max-busy 15 --quiet-wait 300]

import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClickHouseClient } from '@clickhouse/client';
import { limitParam } from '../src/api/params.js';
import { removeNamespace } from '../src/bus/namespace.js';
import { freePort, sleep } from './host.js';
import { createLogger } from '../src/log.js';
import { concurrencySeries } from '../pipelines/concurrency/read.js';
import {
  devices,
  geo,
  overview,
  resolveRange,
  topContent,
  type Range,
  type RangeName,
} from '../src/store/queries/index.js';
import { sessionHistory } from '../src/store/events.js';
import { Store } from '../src/store/store.js';
import {
  benchTenant,
  deriveSnapshots,
  eventsPerSession,
  insertBillingAndCatalogue,
  insertSessions,
  lookbackMs,
  rawConcurrency,
  rawDevices,
  rawGeo,
  rawOverview,
  rawTopContent,
  selectRows,
  sessionEvents,
  type Plan,
} from './query-data.js';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '10000000,100000000' },
    'data-dir': { type: 'string', default: '/tmp/darshak-bench-query' },
    keep: { type: 'boolean', default: false },
    reps: { type: 'string', default: '30' },
    'raw-reps': { type: 'string', default: '3' },
    'raw-timeout': { type: 'string', default: '120' },
    ranges: { type: 'string', default: '24h,30d' },
    direct: { type: 'boolean', default: false },
    'max-busy': { type: 'string', default: '15' },
    'quiet-wait': { type: 'string', default: '300' },
    /** Internal: run one size in this process. */
    size: { type: 'string' },
  },
});

const root = fileURLToPath(new URL('../..', import.meta.url));
const mainJs = join(root, 'dist/src/main.js');
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const targetP95Ms = 100;
const targetRatio = 20;
/** Sessions whose stored events are read back, one at a time, with the skip index and (as many others) without. */
const recallSessions = 50;
const perInsert = 10_000_000;

const int = (s: string | undefined, name: string): number => {
  const n = Number(s);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`--${name} must be a positive whole number, got ${JSON.stringify(s)}`);
  return n;
};
const fmt = (n: number): string => n.toLocaleString('en-US');
const ms1 = (n: number): string => (n >= 100 ? fmt(Math.round(n)) : n.toFixed(1));
const secs = (t0: number): string => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

// ---------------------------------------------------------------------------------------------------------------
// Parent: the machine, then one child process per size.

if (args.size === undefined) {
  const sizes = (args.events ?? '').split(',').map((s) => int(s.trim(), 'events'));
  int(args.reps, 'reps');
  int(args['raw-reps'], 'raw-reps');
  int(args['raw-timeout'], 'raw-timeout');
  if (!(Number(args['max-busy']) > 0) || !(Number(args['quiet-wait']) >= 0))
    throw new Error('--max-busy must be a percentage above 0, --quiet-wait seconds (0 or more)');
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}, ${process.platform}`,
  );
  const passOn = process.argv
    .slice(2)
    .filter((a, i, all) => a !== '--events' && all[i - 1] !== '--events' && !a.startsWith('--events='));
  let failed = false;
  for (const size of sizes) {
    const code = await new Promise<number | null>((done) => {
      const child = spawn(process.execPath, [fileURLToPath(import.meta.url), ...passOn, '--size', String(size)], {
        stdio: 'inherit',
      });
      child.on('exit', (c) => done(c));
    });
    if (code !== 0) {
      console.log(`\n(the run at ${fmt(size)} events failed with exit code ${code})`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Child: one size.

interface Meta {
  events_requested: number;
  events: number;
  bench_events: number;
  sessions: number;
  now_ms: number;
  load: Record<string, number>;
}

interface Endpoint {
  name: string;
  path: string;
  range: RangeName;
  api: (client: ClickHouseClient, range: Range) => Promise<unknown>;
  raw: (client: ClickHouseClient, range: Range, timeoutS: number) => Promise<unknown>;
}

interface Timing {
  samples: number[];
  first?: number;
  /** Set when a run exceeded the time limit or failed: the samples before it are kept. */
  failure?: string;
}

const size = int(args.size, 'size');
const reps = int(args.reps, 'reps');
const rawReps = int(args['raw-reps'], 'raw-reps');
const rawTimeout = int(args['raw-timeout'], 'raw-timeout');
const maxBusy = Number(args['max-busy']) / 100;
const quietWait = Number(args['quiet-wait']);
const dir = resolve(args['data-dir'] ?? '/tmp/darshak-bench-query', `events-${size}`);
const metaPath = join(dir, 'bench-query.json');
const log = createLogger('warn');
const tenant = benchTenant;

const endpoints: Endpoint[] = [];
const rangeNames = (args.ranges ?? '24h')
  .split(',')
  .map((r) => r.trim())
  .filter(Boolean) as RangeName[];
for (const r of rangeNames) {
  if (!['24h', '7d', '30d', 'qtd'].includes(r)) throw new Error(`--ranges: unknown range ${r}`);
  endpoints.push({
    name: `overview ${r}`,
    path: `/v1/analytics/overview?range=${r}`,
    range: r,
    api: (c, x) => overview(c, tenant, x),
    raw: (c, x, t) => rawOverview(c, tenant, x, t),
  });
  if (r === rangeNames[0]) {
    endpoints.push({
      name: 'concurrency 24h/5 min',
      path: '/v1/analytics/concurrency?range=24h&interval=5',
      range: '24h',
      api: (c, x) => concurrencySeries(c, tenant, x, 5),
      raw: (c, x, t) => rawConcurrency(c, tenant, x, 5, t),
    });
    endpoints.push({
      name: 'concurrency 7d/60 min',
      path: '/v1/analytics/concurrency?range=7d&interval=60',
      range: '7d',
      api: (c, x) => concurrencySeries(c, tenant, x, 60),
      raw: (c, x, t) => rawConcurrency(c, tenant, x, 60, t),
    });
  }
  // The API's default page, as a dashboard asks for it; the raw answer is cut to the same page.
  const { default: limit } = limitParam;
  endpoints.push({
    name: `top-content ${r}`,
    path: `/v1/analytics/top-content?range=${r}&limit=${limit}`,
    range: r,
    api: (c, x) => topContent(c, tenant, x, limit),
    raw: async (c, x, t) => {
      const list = await rawTopContent(c, tenant, x, t);
      return { items: list.slice(0, limit), total: list.length };
    },
  });
  endpoints.push({
    name: `geo ${r}`,
    path: `/v1/analytics/geo?range=${r}`,
    range: r,
    api: (c, x) => geo(c, tenant, x),
    raw: (c, x, t) => rawGeo(c, tenant, x, t),
  });
  endpoints.push({
    name: `devices ${r}`,
    path: `/v1/analytics/devices?range=${r}`,
    range: r,
    api: (c, x) => devices(c, tenant, x),
    raw: (c, x, t) => rawDevices(c, tenant, x, t),
  });
}

const readMeta = (): Meta | null => {
  try {
    return JSON.parse(readFileSync(metaPath, 'utf8')) as Meta;
  } catch {
    return null;
  }
};

async function load(client: ClickHouseClient): Promise<Meta> {
  const nowMs = Math.floor(Date.now() / 60_000) * 60_000;
  const stages: Record<string, number> = {};
  let t0 = performance.now();
  const perSession = await eventsPerSession(client, { sessions: 0, users: 1000, anons: 1000, nowMs });
  // Billing and catalogue events add about 0.35 × 3.9 events per user, users being a quarter of the sessions.
  const sessions = Math.round(size / (perSession + 0.35 * 0.25 * 3.9));
  const plan: Plan = {
    sessions,
    users: Math.max(1000, Math.round(sessions / 4)),
    anons: Math.max(1000, Math.round(sessions / 2.5)),
    nowMs,
  };
  const chunk = Math.max(1, Math.round(perInsert / perSession));
  console.log(
    `loading ${fmt(size)} events: ${fmt(sessions)} sessions (${perSession.toFixed(1)} events each), ${fmt(plan.users)} users, in inserts of ${fmt(chunk)} sessions`,
  );
  for (let first = 0; first < sessions; first += chunk) {
    await insertSessions(client, plan, first, Math.min(chunk, sessions - first));
    console.log(`  events: ${fmt(Math.min(sessions, first + chunk))} / ${fmt(sessions)} sessions, ${secs(t0)}`);
  }
  await insertBillingAndCatalogue(client, plan);
  stages.generate_events_s = (performance.now() - t0) / 1000;
  // A silent loss (see noDedup in query-data.ts) must fail the run, not skew it.
  const [stored] = await selectRows<{ n: string }>(client, `SELECT count() AS n FROM events WHERE session_id != ''`);
  const expected = await sessionEvents(client, plan);
  if (Number(stored!.n) !== expected)
    throw new Error(`stored ${fmt(Number(stored!.n))} session events, generated ${fmt(expected)}`);
  t0 = performance.now();
  await client.command({ query: 'OPTIMIZE TABLE events FINAL' });
  stages.merge_events_s = (performance.now() - t0) / 1000;
  console.log(`  events merged (OPTIMIZE FINAL): ${secs(t0)}`);
  const [count] = await selectRows<{ n: string; b: string }>(
    client,
    `SELECT count() AS n, countIf(tenant = {t:String}) AS b FROM events`,
    { t: tenant },
  );
  const events = Number(count!.n);
  t0 = performance.now();
  await deriveSnapshots(client, Math.max(1, Math.ceil(events / perInsert)), (step) =>
    console.log(`  snapshots: ${step}, ${secs(t0)}`),
  );
  stages.derive_snapshots_s = (performance.now() - t0) / 1000;
  const [s] = await selectRows<{ n: string; m: string }>(
    client,
    `SELECT (SELECT uniqExact(tenant, session_id) FROM session_hours) AS n, (SELECT uniqExact(tenant, session_id) FROM events WHERE session_id != '') AS m`,
  );
  if (s!.n !== s!.m) throw new Error(`session_hours holds ${s!.n} sessions, events ${s!.m}`);
  console.log(
    `  checked: every generated event stored (${fmt(expected)} session events), every session in session_hours`,
  );
  const meta: Meta = {
    events_requested: size,
    events,
    bench_events: Number(count!.b),
    sessions: Number(s!.n),
    now_ms: nowMs,
    load: stages,
  };
  writeFileSync(metaPath, JSON.stringify(meta, null, 2));
  return meta;
}

/** CPU time of the whole machine (busy, total), from /proc/stat; null where there is none. */
function cpuTimes(): [number, number] | null {
  try {
    const v = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    return [total - v[3]! - (v[4] ?? 0), total];
  } catch {
    return null;
  }
}

async function busy(): Promise<number> {
  const a = cpuTimes();
  await sleep(1000);
  const b = cpuTimes();
  return a && b ? (b[0] - a[0]) / Math.max(1, b[1] - a[1]) : loadavg()[0]! / cpus().length;
}

/** Wait until the machine is quiet (others' work would be timed as ours); answers how busy it was when we went on. */
async function quiet(): Promise<number> {
  const deadline = Date.now() + quietWait * 1000;
  let b = await busy();
  while (b > maxBusy && Date.now() < deadline) {
    await sleep(2000);
    b = await busy();
  }
  return b;
}
const busyCell = (b: number): string => `${Math.round(b * 100)}%${b > maxBusy ? ' (!)' : ''}`;

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

/** Largest relative difference between two answers (Infinity when their shapes or strings differ), and where. */
function difference(a: unknown, b: unknown, path = ''): [number, string] {
  if (typeof a === 'number' && typeof b === 'number') {
    const d = a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b));
    return [d, path];
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return [Infinity, `${path} length ${a.length} vs ${b.length}`];
    let worst: [number, string] = [0, ''];
    a.forEach((x, i) => {
      const d = difference(x, b[i], `${path}[${i}]`);
      if (d[0] > worst[0]) worst = d;
    });
    return worst;
  }
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') {
    let worst: [number, string] = [0, ''];
    const ka = Object.keys(a).sort();
    if (ka.join() !== Object.keys(b).sort().join()) return [Infinity, `${path} keys`];
    for (const k of ka) {
      const d = difference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`);
      if (d[0] > worst[0]) worst = d;
    }
    return worst;
  }
  return a === b ? [0, path] : [Infinity, `${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`];
}

async function timeRaw(
  client: ClickHouseClient,
  e: Endpoint,
): Promise<{ timing: Timing; answer: unknown; range: Range }> {
  const timing: Timing = { samples: [] };
  let answer: unknown = null;
  const range = resolveRange(e.range, Date.now());
  for (let i = 0; i < rawReps; i++) {
    const t0 = performance.now();
    try {
      answer = await e.raw(client, range, rawTimeout);
      timing.samples.push(performance.now() - t0);
    } catch (err) {
      const message = (err as Error).message;
      timing.failure = /TIMEOUT_EXCEEDED|Timeout exceeded|timeout/i.test(message)
        ? `> ${rawTimeout} s`
        : `failed: ${message.split('\n')[0]!.slice(0, 200)}`;
      break;
    }
  }
  return { timing, answer, range };
}

async function timeDirect(client: ClickHouseClient, e: Endpoint): Promise<Timing> {
  const timing: Timing = { samples: [] };
  for (let i = -2; i < reps; i++) {
    const t0 = performance.now();
    await e.api(client, resolveRange(e.range, Date.now()));
    const dt = performance.now() - t0;
    if (i === -2) timing.first = dt;
    if (i >= 0) timing.samples.push(dt);
  }
  return timing;
}

/** The api role on the loaded data directory, and each endpoint timed over HTTP, one request at a time. */
async function timeHttp(): Promise<Map<string, Timing>> {
  const prefix = `benchq${randomUUID().slice(0, 8)}`;
  const env = { ...process.env, NATS_URL: natsUrl, NATS_PREFIX: prefix, LOG_LEVEL: 'warn' };
  const out = new Map<string, Timing>();
  const email = 'owner@bench.test';
  const password = 'bench password 1';
  try {
    const created = spawnSync(
      process.execPath,
      [
        mainJs,
        'tenant',
        'create',
        '--slug',
        tenant,
        '--name',
        'Bench',
        '--plan',
        'enterprise',
        '--owner-email',
        email,
        // The = form: a random password may begin with a dash, which would read as an option.
        `--owner-password=${password}`,
      ],
      { env, encoding: 'utf8' },
    );
    if (created.status !== 0)
      throw new Error(`darshak tenant create failed (${created.status}): ${created.stderr.trim()}`);
    const port = await freePort();
    const api = spawn(process.execPath, [mainJs, 'start', '--role', 'api'], {
      env: {
        ...env,
        DATA_DIR: dir,
        BASE_PORT: String(port),
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        ANALYTICS_RATE_PER_MINUTE: '1000000',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    api.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const exited = new Promise<void>((done) => api.on('exit', () => done()));
    let gone = false;
    void exited.then(() => (gone = true));
    try {
      const base = `http://127.0.0.1:${port}`;
      const t0 = performance.now();
      const deadline = Date.now() + 180_000;
      for (;;) {
        if (gone) throw new Error(`the api process exited during start:\n${stderr}`);
        const ok = await fetch(`${base}/readyz`).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ok) break;
        if (Date.now() > deadline) throw new Error(`the api process was not ready within 180 s:\n${stderr}`);
        await sleep(100);
      }
      console.log(`api role ready in ${secs(t0)} (port ${port}, NATS_PREFIX ${prefix})`);
      const login = await fetch(`${base}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password }),
      });
      if (login.status !== 200) throw new Error(`login answered ${login.status}: ${await login.text()}`);
      const { access_token: token } = (await login.json()) as { access_token: string };
      const headers = { authorization: `Bearer ${token}` };
      for (const e of endpoints) {
        busyApi.set(e.name, await quiet());
        const timing: Timing = { samples: [] };
        for (let i = -2; i < reps; i++) {
          const t = performance.now();
          const r = await fetch(`${base}${e.path}`, { headers });
          const body = await r.text();
          const dt = performance.now() - t;
          if (r.status !== 200) throw new Error(`GET ${e.path} answered ${r.status}: ${body.slice(0, 500)}`);
          if (i === -2) timing.first = dt;
          if (i >= 0) timing.samples.push(dt);
        }
        out.set(e.name, timing);
      }
    } finally {
      if (!gone) {
        api.kill('SIGTERM');
        const timer = setTimeout(() => api.kill('SIGKILL'), 30_000);
        await exited;
        clearTimeout(timer);
      }
    }
  } finally {
    await removeNamespace(natsUrl, prefix).catch((err: Error) =>
      console.log(`(NATS namespace ${prefix} not removed: ${err.message})`),
    );
  }
  return out;
}

const started = performance.now();
const chdbVersion = (createRequire(import.meta.url)('chdb/package.json') as { version: string }).version;
let meta = readMeta();
if (meta && meta.events_requested !== size) meta = null;
if (!meta && existsSync(dir)) rmSync(dir, { recursive: true, force: true });
const reused = meta !== null;

console.log(`\n## ${fmt(size)} events\n`);
const store = await Store.open({ clickhouse_url: '', data_dir: dir, events_retention_days: 400 }, log);
const client = store.client;
const [version] = await selectRows<{ v: string }>(client, 'SELECT version() AS v');
console.log(`store: chDB ${chdbVersion} (embedded ClickHouse ${version!.v}), DATA_DIR ${dir}`);
if (!meta) meta = await load(client);
else console.log(`reusing the data loaded at ${new Date(meta.now_ms).toISOString()} (${fmt(meta.events)} events)`);
const ageH = (Date.now() - meta.now_ms) / 3_600_000;
// The API's ranges end at the coming minute: in a later hour than the data, their last hour is empty.
const laterHour = Math.floor(Date.now() / 3_600_000) > Math.floor(meta.now_ms / 3_600_000);

const tables = await selectRows<{ table: string; rows: string; bytes: string; parts: string }>(
  client,
  `SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes, count() AS parts FROM system.parts WHERE active AND database = currentDatabase()
   GROUP BY table ORDER BY sum(bytes_on_disk) DESC`,
);
const [bench] = await selectRows<{ sessions: string; viewers: string; contents: string }>(
  client,
  `SELECT uniqExact(session_id) AS sessions, uniqExact(viewer) AS viewers, uniqExact(content_id) AS contents FROM session_hours WHERE tenant = {t:String}`,
  { t: tenant },
);
const du = spawnSync('du', ['-sb', dir], { encoding: 'utf8' });
const diskBytes = Number(du.stdout.split(/\s/)[0]);
const activeBytes = tables.reduce((n, t) => n + Number(t.bytes), 0);

console.log(
  `data: ${fmt(meta.events)} events (${fmt(meta.bench_events)} of tenant "${tenant}", ${fmt(Number(bench!.sessions))} of its sessions, ${fmt(Number(bench!.viewers))} viewers, ${fmt(Number(bench!.contents))} contents), ${fmt(meta.sessions)} sessions in all, ending ${new Date(meta.now_ms).toISOString()}${ageH > 1 ? ` (${ageH.toFixed(1)} h ago: the 24h range holds less than a fresh load)` : ''}${laterHour ? "; this run starts in a later UTC hour than the data ends, so the ranges' last, partial hour holds no sessions, which a live store's does (the overview's lookups of it find none: faster than live)" : ''}`,
);
console.log(
  `load${reused ? ' (earlier run)' : ''}: events generated ${meta.load.generate_events_s!.toFixed(0)} s, merged ${meta.load.merge_events_s!.toFixed(0)} s, snapshot tables derived ${meta.load.derive_snapshots_s!.toFixed(0)} s; disk: ${(activeBytes / 2 ** 30).toFixed(2)} GiB of active parts, ${(diskBytes / 2 ** 30).toFixed(2)} GiB under DATA_DIR (du: also counts parts merged away and not yet deleted)`,
);
console.log('\n| table | rows | on disk | parts |\n|---|---:|---:|---:|');
for (const t of tables)
  console.log(`| ${t.table} | ${fmt(Number(t.rows))} | ${(Number(t.bytes) / 2 ** 20).toFixed(1)} MiB | ${t.parts} |`);

// Raw answers, and the snapshot answer at the same instant for the comparison.
const load1 = (): string => loadavg()[0]!.toFixed(2);
console.log(
  `\nraw answers (${rawReps} runs each, max_execution_time ${rawTimeout} s; each after waiting up to ${quietWait} s for the machine to be ≤ ${Math.round(maxBusy * 100)}% busy; load average ${load1()}):`,
);
const raw = new Map<string, Timing>();
const agreement = new Map<string, string>();
const busyRaw = new Map<string, number>();
const busyApi = new Map<string, number>();
for (const e of endpoints) {
  busyRaw.set(e.name, await quiet());
  const t0 = performance.now();
  const r = await timeRaw(client, e);
  raw.set(e.name, r.timing);
  if (r.answer !== null) {
    const [d, where] = difference(await e.api(client, r.range), r.answer);
    agreement.set(
      e.name,
      d <= 1e-9 ? 'yes' : Number.isFinite(d) ? `≈ (max ${(d * 100).toPrecision(2)}% at ${where})` : `NO (${where})`,
    );
  } else agreement.set(e.name, 'n/a');
  console.log(
    `  ${e.name}: ${r.timing.samples.map((x) => ms1(x)).join(', ')} ms${r.timing.failure ? `, then ${r.timing.failure}` : ''} (${secs(t0)}; machine ${busyCell(busyRaw.get(e.name)!)} busy before)`,
  );
}

// A late event for a session that left an aggregator's memory makes its shard wait for the session's stored events
// (docs/aggregation.md): one read of `events`, timed here for whole sessions, with the `session_id` skip index and
// without it. Each session is read once: ClickHouse's query condition cache would make a second read of it cheap.
const sample = await selectRows<{ session_id: string }>(
  client,
  `SELECT session_id FROM (SELECT DISTINCT session_id FROM session_hours WHERE tenant = '${tenant}') ORDER BY cityHash64(session_id) LIMIT ${2 * recallSessions}`,
);
const recall = { index: [] as number[], scan: [] as number[] };
let recalledEvents = 0;
for (const [i, { session_id }] of sample.entries()) {
  const indexed = i % 2 === 0;
  const t0 = performance.now();
  const req = { tenant, sessions: [session_id], before_seq: Number.MAX_SAFE_INTEGER, received_before: 0, offset: 0 };
  recalledEvents += (await sessionHistory(client, req, 5000, { use_skip_indexes: indexed ? 1 : 0 })).length;
  (indexed ? recall.index : recall.scan).push(performance.now() - t0);
}

let api = new Map<string, Timing>();
let how: string;
const apiRoleBuilt = existsSync(join(root, 'dist/src/api/role.js'));
if (args.direct || !apiRoleBuilt) {
  how = `in-process calls of src/store/queries${!args.direct ? ' (dist/src/api/role.js is not built yet)' : ''}`;
  for (const e of endpoints) {
    busyApi.set(e.name, await quiet());
    api.set(e.name, await timeDirect(client, e));
  }
  await store.close();
} else {
  await store.close();
  how = 'HTTP GET to `darshak start --role api` (sequential, keep-alive, fetch)';
  console.log(`load average ${load1()} before the API timings`);
  api = await timeHttp();
}

console.log(
  `\n### ${fmt(size)} events: API (${how}, ${reps} timed after 2 warm-up) vs raw SQL over \`events\` (${rawReps} runs)\n`,
);
console.log(
  `| endpoint | API p50 ms | API p95 ms | API first ms | raw p50 ms | raw p95 ms | raw/API (p50) | p95 ≤ ${targetP95Ms} ms | ≥ ${targetRatio}× | same answer | CPU busy before API / raw |`,
);
console.log('|---|---:|---:|---:|---:|---:|---:|---|---|---|---|');
for (const e of endpoints) {
  const a = api.get(e.name)!;
  const r = raw.get(e.name)!;
  const a50 = pct(a.samples, 50);
  const a95 = pct(a.samples, 95);
  const timedOut = r.samples.length === 0;
  const r50 = timedOut ? rawTimeout * 1000 : pct(r.samples, 50);
  const r95 = timedOut ? rawTimeout * 1000 : pct(r.samples, 95);
  const ratio = r50 / a50;
  const rawCell = (v: number): string => (timedOut ? (r.failure ?? '?') : ms1(v));
  console.log(
    `| ${e.name} | ${ms1(a50)} | ${ms1(a95)} | ${ms1(a.first ?? NaN)} | ${rawCell(r50)} | ${rawCell(r95)}${!timedOut && r.failure ? ` (then ${r.failure})` : ''} | ${timedOut ? '> ' : ''}${ratio.toFixed(0)}× | ${a95 <= targetP95Ms ? 'met' : 'NOT met'} | ${ratio >= targetRatio ? 'met' : 'NOT met'} | ${agreement.get(e.name)} | ${busyCell(busyApi.get(e.name)!)} / ${busyCell(busyRaw.get(e.name)!)} |`,
  );
}
console.log(
  `\nNotes: snapshot tables are derived from the generated events with SQL following pipelines/*.ts (fully merged: one session_hours row per session and hour), so their cardinalities are the live system's; their values are not checked against the pipelines, only against the raw SQL ("same answer"). Raw SQL reads each session's events from [from − ${lookbackMs / 3_600_000} h, to) (generated sessions last under 5 h). "CPU busy before": the whole machine, sampled for 1 s while this run was idle, just before the endpoint was timed; (!) marks a row timed while others were using more than ${Math.round(maxBusy * 100)}% of it after ${quietWait} s of waiting, so it counts their work too.`,
);
console.log(
  `\nSession recall (a late event's session read back from \`events\`, in-process, one session per read, ${(recalledEvents / Math.max(1, sample.length)).toFixed(1)} events each): with the \`session_id\` skip index p50 ${ms1(pct(recall.index, 50))} ms, p95 ${ms1(pct(recall.index, 95))} ms; without it p50 ${ms1(pct(recall.scan, 50))} ms, p95 ${ms1(pct(recall.scan, 95))} ms (${recall.index.length} sessions each)`,
);
console.log(`run time for this size: ${secs(started)}`);

if (!args.keep) rmSync(dir, { recursive: true, force: true });
else console.log(`kept ${dir} (re-run with the same --data-dir to reuse it)`);
setImmediate(() => process.exit(0));
