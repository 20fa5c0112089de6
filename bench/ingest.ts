// Ingest throughput benchmark (npm run bench:ingest).
//
// Starts `darshak start --role ingest` as a separate process (pinned to core 0 when `taskset` exists), drives it
// from another process (wrk with a Lua script, pinned to core 1; a Node keep-alive load generator when wrk is not
// installed) and reports JetStream-acknowledged events per second and latency for three scenarios, batches of 500
// realistic events, 1-event requests, and the batches' events as 500 CMCD v2 reports (POST /v1/ingest/cmcd, always
// from the Node generator), on uWebSockets.js and on node:http. In the same run it measures a bare JSON.parse loop
// over the same bodies on one core, and prints the ratio the ingest target is stated in.
//
//   npm run bench:ingest [-- --duration 15 --warmup 3 --engines uws,node --scenarios batch,single,cmcd
//                            --batch-connections 64 --single-connections 256 --loadgen auto|wrk|node --json out.json]
//
// Environment: NATS_URL (default nats://127.0.0.1:4222); BENCH_SERVICE_NODE_ARGS adds node flags to the service
// (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
//
// Internal modes (the script runs itself in child processes): `--parse FILE SECONDS` and `--loadgen-child JSON`;
// `--write-bodies DIR` writes the request bodies (batch.txt, single.txt: one JSON body a line) and exits.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeCmcd, type Cmcd } from '@svta/cml-cmcd';
import { connect } from 'nats';
import { removeNamespace } from '../src/bus/namespace.js';
import {
  cli,
  cpuModel,
  freePort,
  gitCommit,
  machineCpu,
  mainJs,
  natsServerPid,
  natsServerVersion,
  natsUrl,
  processCpu,
  run,
  scrapeMetrics,
  sleep,
} from './host.js';

const selfJs = fileURLToPath(import.meta.url);
const ingestPath = '/v1/ingest/events';
const cmcdPath = '/v1/ingest/cmcd';

// ---------------------------------------------------------------------------------------------------------------
// Realistic events: a seeded generator, so every run sends the same bodies.

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const rand = prng(0x5eed);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1));
const hex = (n: number): string => {
  let s = '';
  for (let i = 0; i < n; i++) s += Math.floor(rand() * 16).toString(16);
  return s;
};
const uuid = (): string => `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;

const platforms = [
  {
    device_type: 'mobile',
    os: 'Android 14',
    browser: 'Chrome Mobile 126',
    player: 'ExoPlayer 2.19',
    app_version: '5.12.1',
  },
  { device_type: 'mobile', os: 'iOS 17.5', browser: 'Safari Mobile 17', player: 'AVPlayer', app_version: '5.12.0' },
  {
    device_type: 'desktop',
    os: 'Windows 11',
    browser: 'Chrome 126',
    player: 'Shaka Player 4.9',
    app_version: 'web-2026.11.3',
  },
  {
    device_type: 'desktop',
    os: 'macOS 14.5',
    browser: 'Safari 17.5',
    player: 'hls.js 1.5',
    app_version: 'web-2026.11.3',
  },
  { device_type: 'tv', os: 'Tizen 7.0', browser: 'Samsung Internet TV', player: 'AVPlay', app_version: 'tv-3.4.0' },
  {
    device_type: 'tv',
    os: 'Android TV 12',
    browser: 'WebView 120',
    player: 'ExoPlayer 2.19',
    app_version: 'atv-4.1.2',
  },
  { device_type: 'tablet', os: 'iPadOS 17.5', browser: 'Safari 17', player: 'AVPlayer', app_version: '5.12.0' },
] as const;
const cdns = ['akamai', 'cloudfront', 'fastly', 'jio-cdn'] as const;
const pops = ['BOM', 'DEL', 'MAA', 'BLR', 'HYD', 'CCU', 'SIN'] as const;
const renditions = [
  { name: '240p', kbps: 400 },
  { name: '480p', kbps: 1200 },
  { name: '720p', kbps: 2800 },
  { name: '1080p', kbps: 5000 },
] as const;
const titles = [
  'Sacred Games S2E4',
  'IPL 2026: MI vs CSK',
  'Panchayat S3E1',
  'RRR',
  'Kota Factory S1E2',
  'Delhi Crime S2E1',
] as const;
const contentTypeOf = ['episode', 'sports', 'episode', 'movie', 'episode', 'series'] as const;

interface BenchEvent {
  event_id: string;
  event_type: string;
  ts: string;
  session_id: string;
  anonymous_id?: string;
  user_id?: string;
  content_id?: string;
  content_type?: string;
  content_title?: string;
  position_sec?: number;
  bitrate_kbps?: number;
  context: Record<string, string>;
  properties?: Record<string, unknown>;
}

interface Session {
  id: string;
  anonymousId: string;
  userId: string | undefined;
  content: number;
  context: Record<string, string>;
  position: number;
  rendition: number;
  started: boolean;
}

function newSession(): Session {
  const p = pick(platforms);
  return {
    id: uuid(),
    anonymousId: `anon_${hex(20)}`,
    userId: rand() < 0.6 ? `u_${int(100_000, 9_999_999)}` : undefined,
    content: int(0, titles.length - 1),
    context: { ...p, cdn: pick(cdns), pop: pick(pops) },
    position: 0,
    rendition: int(1, 3),
    started: false,
  };
}

/** The next event of a playback session: mostly heartbeats, with the starts, stalls, switches and ends around them. */
function nextEvent(s: Session, now: number): BenchEvent {
  const base = (event_type: string): BenchEvent => ({
    event_id: uuid(),
    event_type,
    ts: new Date(now - int(0, 5_000)).toISOString(),
    session_id: s.id,
    ...(s.userId !== undefined ? { user_id: s.userId } : { anonymous_id: s.anonymousId }),
    position_sec: s.position,
    context: s.context,
  });
  const r = renditions[s.rendition] as (typeof renditions)[number];
  if (!s.started) {
    s.started = true;
    return {
      ...base('play_start'),
      content_id: `cnt_${String(s.content).padStart(6, '0')}`,
      content_type: contentTypeOf[s.content],
      content_title: titles[s.content],
      properties: { duration_sec: int(600, 9_000), autoplay: rand() < 0.3, referrer: 'home_rail', drm: 'widevine' },
    };
  }
  s.position += 10;
  const x = rand();
  if (x < 0.72) {
    return {
      ...base('heartbeat'),
      properties: {
        playhead_sec: s.position,
        buffered_sec: int(2, 30),
        rendition: r.name,
        dropped_frames: int(0, 3),
        bandwidth_kbps: int(1_000, 40_000),
      },
    };
  }
  if (x < 0.76) return { ...base('first_frame'), properties: { startup_ms: int(300, 4_000) } };
  if (x < 0.8) return { ...base('rebuffer_start'), properties: { rendition: r.name, buffered_sec: 0 } };
  if (x < 0.84) return { ...base('rebuffer_end'), properties: { duration_ms: int(200, 8_000) } };
  if (x < 0.89) {
    s.rendition = int(0, renditions.length - 1);
    const to = renditions[s.rendition] as (typeof renditions)[number];
    return {
      ...base('bitrate_change'),
      bitrate_kbps: to.kbps,
      properties: { from_kbps: r.kbps, rendition: to.name, reason: 'abr' },
    };
  }
  if (x < 0.92) return { ...base(pick(['pause', 'resume'])), properties: { trigger: 'user' } };
  if (x < 0.95)
    return {
      ...base(pick(['seek_start', 'seek_end'])),
      properties: { from_sec: s.position, to_sec: s.position + int(-60, 120) },
    };
  if (x < 0.97)
    return {
      ...base('error'),
      properties: {
        code: pick(['MEDIA_ERR_NETWORK', 'DRM_LICENSE_EXPIRED', 'HTTP_404']),
        fatal: rand() < 0.2,
        message: 'segment request failed',
      },
    };
  if (x < 0.985) return { ...base('ended'), properties: { watched_sec: s.position } };
  return { ...base('session_end'), properties: { reason: 'page_unload' } };
}

interface Bodies {
  batch: string[];
  single: string[];
  /** The batch bodies' events as players' CMCD v2 event reports, one per line (application/cmcd). */
  cmcd: string[];
}

const cmcdState: Record<string, [e: string, sta?: string]> = {
  play_start: ['ps', 's'],
  first_frame: ['ps', 'p'],
  resume: ['ps', 'p'],
  seek_end: ['ps', 'p'],
  rebuffer_end: ['ps', 'p'],
  rebuffer_start: ['ps', 'r'],
  pause: ['ps', 'a'],
  seek_start: ['ps', 'k'],
  ended: ['ps', 'e'],
  session_end: ['ps', 'q'],
  heartbeat: ['t', 'p'],
  bitrate_change: ['bc'],
  error: ['e'],
};

/** An event as the report a player's CMCD v2 event target would send for it (docs/cmcd.md, the mapping). */
function cmcdReport(e: BenchEvent, sn: number): string {
  const [type, sta] = cmcdState[e.event_type]!;
  const p = e.properties ?? {};
  const report: Record<string, unknown> = {
    v: 2,
    e: type,
    ts: Date.parse(e.ts),
    sid: e.session_id,
    sn,
    st: 'v',
    sf: 'h',
  };
  if (sta) report.sta = sta;
  if (e.event_type === 'error') {
    report.sta = p.fatal === true ? 'f' : 'p';
    report.ec = [String(p.code)];
  }
  if (e.content_id) report.cid = e.content_id;
  if (e.position_sec !== undefined) report.pt = e.position_sec * 1000;
  if (e.bitrate_kbps !== undefined) report.br = [e.bitrate_kbps];
  if (typeof p.buffered_sec === 'number') report.bl = [p.buffered_sec * 1000];
  if (typeof p.bandwidth_kbps === 'number') report.mtp = [p.bandwidth_kbps];
  if (e.user_id) report['io.darshak-user-id'] = e.user_id;
  if (e.anonymous_id) report['io.darshak-anonymous-id'] = e.anonymous_id;
  if (e.content_title) report['io.darshak-content-title'] = e.content_title;
  if (e.context.cdn) report.cdn = e.context.cdn;
  return encodeCmcd(report as Cmcd, { reportingMode: 'event' });
}

/** Batches as a server-side forwarder sends them (many sessions interleaved); single events as a player sends them. */
function makeBodies(batchBodies: number, singleBodies: number): Bodies {
  const now = Date.now();
  const sessions = Array.from({ length: 400 }, newSession);
  const batch: string[] = [];
  const cmcd: string[] = [];
  const sn = new Map<string, number>();
  for (let b = 0; b < batchBodies; b++) {
    const events: BenchEvent[] = [];
    for (let i = 0; i < 500; i++) events.push(nextEvent(pick(sessions), now));
    batch.push(JSON.stringify({ events, sent_at: new Date(now).toISOString() }));
    cmcd.push(
      events
        .map((e) => {
          const n = sn.get(e.session_id) ?? 0;
          sn.set(e.session_id, n + 1);
          return cmcdReport(e, n);
        })
        .join('\n'),
    );
  }
  const single: string[] = [];
  for (let b = 0; b < singleBodies; b++) single.push(JSON.stringify({ events: [nextEvent(pick(sessions), now)] }));
  return { batch, single, cmcd };
}

// ---------------------------------------------------------------------------------------------------------------
// Child mode: bare JSON.parse over the same bodies.

interface ParseResult {
  bodies: number;
  events: number;
  seconds: number;
  eventsPerSecond: number;
  mbPerSecond: number;
}

function runParse(file: string, seconds: number): ParseResult {
  const bodies = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
  let events = 0;
  let bytes = 0;
  let n = 0;
  const sizes = bodies.map((b) => Buffer.byteLength(b));
  // Warm up for a second (the JIT and the caches settle), then measure.
  const warm = process.hrtime.bigint() + 1_000_000_000n;
  for (let i = 0; process.hrtime.bigint() < warm; i++) JSON.parse(bodies[i % bodies.length] as string);
  const started = process.hrtime.bigint();
  const limit = started + BigInt(Math.round(seconds * 1e9));
  let now = started;
  while (now < limit) {
    for (let k = 0; k < 16; k++) {
      const i = n++ % bodies.length;
      const v = JSON.parse(bodies[i] as string) as { events: unknown[] };
      events += v.events.length;
      bytes += sizes[i] as number;
    }
    now = process.hrtime.bigint();
  }
  const elapsed = Number(now - started) / 1e9;
  return { bodies: n, events, seconds: elapsed, eventsPerSecond: events / elapsed, mbPerSecond: bytes / elapsed / 1e6 };
}

// ---------------------------------------------------------------------------------------------------------------
// Child mode: a Node load generator with keep-alive agents (used when wrk is not installed).

interface LoadSpec {
  url: string;
  key: string;
  /** One body a line; with `cmcd`, each line a JSON string (a CMCD body holds line breaks), sent as application/cmcd. */
  bodiesFile: string;
  cmcd: boolean;
  connections: number;
  seconds: number;
}

interface LoadResult {
  requests: number;
  seconds: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  statuses: Record<string, number>;
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
}

async function runLoadgen(spec: LoadSpec): Promise<LoadResult> {
  const bodies = readFileSync(spec.bodiesFile, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => Buffer.from(spec.cmcd ? (JSON.parse(l) as string) : l));
  const url = new URL(spec.url);
  const agent = new Agent({ keepAlive: true, maxSockets: spec.connections, maxFreeSockets: spec.connections });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const errors = { connect: 0, read: 0, write: 0, status: 0, timeout: 0 };
  let requests = 0;
  let next = 0;
  const started = process.hrtime.bigint();
  const end = started + BigInt(Math.round(spec.seconds * 1e9));
  const one = (body: Buffer): Promise<void> =>
    new Promise((resolve) => {
      const t0 = process.hrtime.bigint();
      const req = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: {
            'content-type': spec.cmcd ? 'application/cmcd' : 'application/json',
            'content-length': body.length,
            'x-api-key': spec.key,
          },
          timeout: 10_000,
        },
        (res) => {
          res.on('data', () => undefined);
          res.on('end', () => {
            const t1 = process.hrtime.bigint();
            if (t1 <= end) {
              requests++;
              latencies.push(Number(t1 - t0) / 1000);
              const s = String(res.statusCode ?? 0);
              statuses[s] = (statuses[s] ?? 0) + 1;
              if ((res.statusCode ?? 0) > 399) errors.status++;
            }
            resolve();
          });
          res.on('error', () => {
            errors.read++;
            resolve();
          });
        },
      );
      req.on('timeout', () => {
        errors.timeout++;
        req.destroy();
      });
      req.on('error', () => {
        errors.connect++;
        resolve();
      });
      req.end(body);
    });
  const worker = async (): Promise<void> => {
    while (process.hrtime.bigint() < end) await one(bodies[next++ % bodies.length] as Buffer);
  };
  await Promise.all(Array.from({ length: spec.connections }, worker));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const q = (p: number): number =>
    latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  const mean = latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length);
  return {
    requests,
    seconds: Math.min(spec.seconds, seconds),
    errors,
    statuses,
    latencyUs: { p50: q(50), p90: q(90), p99: q(99), max: q(100), mean },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Orchestration helpers.

const hasCommand = (cmd: string, args: string[]): boolean => {
  const r = spawnSync(cmd, args, { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
};

const haveTaskset = hasCommand('taskset', ['--version']);
const pinned = (core: number, cmd: string, args: string[]): [string, string[]] =>
  haveTaskset ? ['taskset', ['-c', String(core), cmd, ...args]] : [cmd, args];

interface RunningService {
  child: ChildProcess;
  port: number;
  exited: Promise<number | null>;
}

async function startService(prefix: string, engine: string, dir: string): Promise<RunningService> {
  const port = await freePort();
  const extra = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const [cmd, args] = pinned(0, process.execPath, [...extra, mainJs, 'start', '--role', 'ingest']);
  const log = createWriteStream(join(dir, `service-${engine}.log`));
  const child = spawn(cmd, args, {
    env: {
      ...process.env,
      NATS_URL: natsUrl,
      NATS_PREFIX: prefix,
      NATS_AUTOSTART: 'false',
      INGEST_PORT: String(port),
      HTTP_ENGINE: engine,
      LOG_LEVEL: 'warn',
      DATA_DIR: join(dir, 'data'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (gone)
      throw new Error(
        `the ingest service (${engine}) exited during start; see ${join(dir, `service-${engine}.log`)}:\n${readFileSync(join(dir, `service-${engine}.log`), 'utf8').slice(-2000)}`,
      );
    try {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (r.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the ingest service (${engine}) was not ready within 30 s`);
    await sleep(100);
  }
  return { child, port, exited };
}

async function stopService(s: RunningService): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  s.child.kill('SIGTERM');
  const timer = setTimeout(() => s.child.kill('SIGKILL'), 15_000);
  await s.exited;
  clearTimeout(timer);
}

interface Scrape {
  statuses: Record<string, number>;
  accepted: number;
  rejected: number;
  messages: number;
  messageEvents: number;
  failedPublishes: number;
}

async function scrape(port: number): Promise<Scrape> {
  const out: Scrape = { statuses: {}, accepted: 0, rejected: 0, messages: 0, messageEvents: 0, failedPublishes: 0 };
  for (const { name, labels, value } of await scrapeMetrics(port)) {
    if (name === 'darshak_http_requests_total' && (labels.route === ingestPath || labels.route === cmcdPath)) {
      const s = labels.status as string;
      out.statuses[s] = (out.statuses[s] ?? 0) + value;
    } else if (name === 'darshak_ingest_events_total') {
      if (labels.outcome === 'accepted') out.accepted = value;
      if (labels.outcome === 'rejected') out.rejected = value;
    } else if (name === 'darshak_bus_events_per_message_count') out.messages = value;
    else if (name === 'darshak_bus_events_per_message_sum') out.messageEvents = value;
    else if (name === 'darshak_bus_publishes_total' && labels.outcome === 'failed') out.failedPublishes = value;
  }
  return out;
}

async function purgeEvents(prefix: string): Promise<void> {
  const nc = await connect({ servers: natsUrl, reconnect: false });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.purge(`${prefix}_events`);
  } finally {
    await nc.close();
  }
}

interface CpuSample {
  at: number;
  service: number;
  nats: number;
  machine: number;
}

const cpuSample = (servicePid: number | undefined, natsPid: number | undefined): CpuSample => ({
  at: performance.now() / 1000,
  service: processCpu(servicePid),
  nats: processCpu(natsPid),
  machine: machineCpu(),
});

/** Shares of one core during the window: the ingest service, nats-server, and everything else (load generator included). */
function cpuShares(a: CpuSample, b: CpuSample): { service: number; nats: number; rest: number; seconds: number } {
  const seconds = b.at - a.at;
  const service = (b.service - a.service) / seconds;
  const nats = (b.nats - a.nats) / seconds;
  const machine = (b.machine - a.machine) / seconds;
  return { service, nats, rest: machine - service - (Number.isNaN(nats) ? 0 : nats), seconds };
}

// ---------------------------------------------------------------------------------------------------------------
// Load generation: wrk (preferred) or the Node generator above.

const luaScript = (bodiesFile: string, key: string): string => `-- generated by bench/ingest.ts
local reqs = {}
local idx = 0
function init(args)
  local f = assert(io.open(${JSON.stringify(bodiesFile)}, "r"))
  local headers = { ["Content-Type"] = "application/json", ["X-API-Key"] = ${JSON.stringify(key)},
                    ["User-Agent"] = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36" }
  for line in f:lines() do
    if #line > 0 then reqs[#reqs + 1] = wrk.format("POST", ${JSON.stringify(ingestPath)}, headers, line) end
  end
  f:close()
  idx = math.random(#reqs) - 1
end
function request()
  idx = idx + 1
  if idx > #reqs then idx = 1 end
  return reqs[idx]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
`;

interface Load {
  tool: 'wrk' | 'node';
  connections: number;
  requests: number;
  seconds: number;
  errors: LoadResult['errors'];
  latencyUs: LoadResult['latencyUs'];
}

async function drive(
  tool: 'wrk' | 'node',
  port: number,
  key: string,
  scenario: Scenario,
  bodiesFile: string,
  luaFile: string,
  connections: number,
  seconds: number,
): Promise<Load> {
  const cmcd = scenario === 'cmcd';
  const url = `http://127.0.0.1:${port}${cmcd ? cmcdPath : ingestPath}`;
  // The Lua script sends JSON bodies; CMCD bodies go through the Node generator.
  if (tool === 'wrk' && !cmcd) {
    const [cmd, args] = pinned(1, 'wrk', [
      '-t1',
      `-c${connections}`,
      `-d${Math.max(1, Math.round(seconds))}s`,
      '--timeout',
      '10s',
      '-s',
      luaFile,
      url,
    ]);
    const r = await run(cmd, args);
    const line = r.stdout.split('\n').find((l) => l.startsWith('WRKJSON '));
    if (r.code !== 0 || !line) throw new Error(`wrk failed (${r.code}): ${r.stderr.trim()}\n${r.stdout}`);
    const j = JSON.parse(line.slice(8)) as {
      requests: number;
      duration_us: number;
      errors: Load['errors'];
      latency_us: Load['latencyUs'];
    };
    return {
      tool,
      connections,
      requests: j.requests,
      seconds: j.duration_us / 1e6,
      errors: j.errors,
      latencyUs: j.latency_us,
    };
  }
  const spec: LoadSpec = { url, key, bodiesFile, cmcd, connections, seconds };
  const [cmd, args] = pinned(1, process.execPath, [selfJs, '--loadgen-child', JSON.stringify(spec)]);
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`node load generator failed (${r.code}): ${r.stderr.trim()}`);
  const j = JSON.parse(r.stdout) as LoadResult;
  return {
    tool: 'node',
    connections,
    requests: j.requests,
    seconds: j.seconds,
    errors: j.errors,
    latencyUs: j.latencyUs,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Main.

type Scenario = 'batch' | 'single' | 'cmcd';
const scenarioName: Record<Scenario, string> = { batch: 'batch 500', single: '1 event', cmcd: 'CMCD 500' };

interface Options {
  duration: number;
  warmup: number;
  engines: string[];
  scenarios: Scenario[];
  batchConnections: number;
  singleConnections: number;
  loadgen: 'auto' | 'wrk' | 'node';
  parseSeconds: number;
  json: string | undefined;
}

function options(argv: string[]): Options {
  const o: Options = {
    duration: 15,
    warmup: 3,
    engines: ['uws', 'node'],
    scenarios: ['batch', 'single', 'cmcd'],
    batchConnections: 64,
    singleConnections: 256,
    loadgen: 'auto',
    parseSeconds: 5,
    json: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] as string;
    const value = argv[i + 1];
    const need = (): string => {
      if (value === undefined) throw new Error(`${flag} needs a value`);
      i++;
      return value;
    };
    const num = (): number => {
      const n = Number(need());
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} must be a positive number`);
      return n;
    };
    switch (flag) {
      case '--duration':
        o.duration = num();
        break;
      case '--warmup': {
        const n = Number(need());
        if (!Number.isFinite(n) || n < 0) throw new Error('--warmup must be a number of seconds, 0 or more');
        o.warmup = n;
        break;
      }
      case '--engines':
        o.engines = need().split(',').filter(Boolean);
        for (const e of o.engines)
          if (e !== 'uws' && e !== 'node') throw new Error(`--engines takes uws and/or node, not ${JSON.stringify(e)}`);
        break;
      case '--scenarios':
        o.scenarios = need()
          .split(',')
          .filter((s): s is Scenario => s in scenarioName);
        break;
      case '--batch-connections':
        o.batchConnections = Math.round(num());
        break;
      case '--single-connections':
        o.singleConnections = Math.round(num());
        break;
      case '--parse-seconds':
        o.parseSeconds = num();
        break;
      case '--loadgen': {
        const v = need();
        if (v !== 'auto' && v !== 'wrk' && v !== 'node') throw new Error('--loadgen is auto, wrk or node');
        o.loadgen = v;
        break;
      }
      case '--json':
        o.json = need();
        break;
      default:
        throw new Error(`unknown option ${flag}`);
    }
  }
  return o;
}

interface ScenarioResult {
  engine: string;
  scenario: Scenario;
  eventsPerRequest: number;
  load: Load;
  requestsPerSecond: number;
  eventsPerSecond: number;
  serverStatuses: Record<string, number>;
  serverAccepted: number;
  eventsPerMessage: number;
  all200: boolean;
  /** Cores' worth of CPU during the measured window (1 = one core busy). */
  cpu: { service: number; nats: number; rest: number };
  /** Ingest-process CPU time per request, in microseconds. */
  serviceCpuUsPerRequest: number;
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const ms = (us: number): string => (us / 1000).toFixed(2);
const pct = (cores: number): string => (Number.isNaN(cores) ? 'n/a' : `${(cores * 100).toFixed(0)}%`);

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === '--parse') {
    process.stdout.write(`${JSON.stringify(runParse(argv[1] as string, Number(argv[2])))}\n`);
    return;
  }
  if (argv[0] === '--write-bodies') {
    const b = makeBodies(16, 2000);
    writeFileSync(join(argv[1] as string, 'batch.txt'), `${b.batch.join('\n')}\n`);
    writeFileSync(join(argv[1] as string, 'single.txt'), `${b.single.join('\n')}\n`);
    return;
  }
  if (argv[0] === '--loadgen-child') {
    process.stdout.write(`${JSON.stringify(await runLoadgen(JSON.parse(argv[1] as string) as LoadSpec))}\n`);
    return;
  }

  const o = options(argv);
  const tool: 'wrk' | 'node' =
    o.loadgen === 'auto' ? (spawnSync('wrk', ['-v']).error === undefined ? 'wrk' : 'node') : o.loadgen;
  const command =
    process.env.npm_lifecycle_event === 'bench:ingest'
      ? `npm run bench:ingest${argv.length ? ` -- ${argv.join(' ')}` : ''}`
      : `node ${process.argv.slice(1).join(' ')}`;
  const machine = {
    cpu: cpuModel(),
    cores: cpus().length,
    node: process.version,
    nats: await natsServerVersion(),
    taskset: haveTaskset,
    wrk:
      tool === 'wrk'
        ? (spawnSync('wrk', ['-v'], { encoding: 'utf8' }).stdout.split('\n')[0] ?? '')
            .replace(/\s*Copyright.*$/, '')
            .trim()
        : '',
  };
  const commit = gitCommit();
  const prefix = `bench${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`.slice(0, 32);
  const dir = mkdtempSync(join(tmpdir(), 'darshak-bench-'));
  const out = (s: string): boolean => process.stdout.write(`${s}\n`);

  out(`Darshak ingest benchmark`);
  out(
    `  machine: ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, nats-server ${machine.nats}${machine.wrk ? `, ${machine.wrk}` : ''}`,
  );
  out(`  commit:  ${commit}`);
  out(`  command: ${command}`);
  out(
    `  pinning: ${haveTaskset ? 'ingest on core 0, load generator on core 1 (taskset); nats-server not pinned' : 'none (taskset not found)'}`,
  );
  out(
    `  load:    ${tool === 'wrk' ? 'wrk (Lua script, 1 thread)' : 'Node keep-alive load generator (wrk not found)'}; ${o.duration} s per scenario after ${o.warmup} s warm-up`,
  );
  out(`  prefix:  ${prefix}`);
  const idleA = machineCpu();
  await sleep(1000);
  const quiet = machineCpu() - idleA;
  out(
    `  before:  machine ${pct(quiet)} busy (of ${machine.cores * 100}%) in the second before the run${quiet > 0.15 ? ' (NOT quiet: figures will be low)' : ''}`,
  );

  const bodies = makeBodies(16, 2000);
  const files: Record<Scenario, string> = {
    batch: join(dir, 'batch.txt'),
    single: join(dir, 'single.txt'),
    cmcd: join(dir, 'cmcd.txt'),
  };
  writeFileSync(files.batch, `${bodies.batch.join('\n')}\n`);
  writeFileSync(files.single, `${bodies.single.join('\n')}\n`);
  writeFileSync(files.cmcd, `${bodies.cmcd.map((b) => JSON.stringify(b)).join('\n')}\n`);
  const avgBytes = (xs: string[]): number => xs.reduce((a, b) => a + Buffer.byteLength(b), 0) / xs.length;
  out(
    `  bodies:  batch of 500 ≈ ${fmt(avgBytes(bodies.batch))} B (${fmt(avgBytes(bodies.batch) / 500)} B/event), 1 event ≈ ${fmt(avgBytes(bodies.single))} B; ` +
      `the batches' events as 500 CMCD reports ≈ ${fmt(avgBytes(bodies.cmcd))} B (${fmt(avgBytes(bodies.cmcd) / 500)} B/report)`,
  );

  // Bare JSON.parse on one core, before the service runs (nothing else competing).
  const parse: Record<'batch' | 'single', ParseResult> = {
    batch: await parseChild(files.batch, o.parseSeconds),
    single: await parseChild(files.single, o.parseSeconds),
  };
  out(`\nBare JSON.parse, one core${haveTaskset ? ' (core 0)' : ''}:`);
  out(`  batch 500: ${fmt(parse.batch.eventsPerSecond)} events/s (${parse.batch.mbPerSecond.toFixed(0)} MB/s)`);
  out(`  1 event:   ${fmt(parse.single.eventsPerSecond)} events/s (${parse.single.mbPerSecond.toFixed(0)} MB/s)`);

  const results: ScenarioResult[] = [];
  const natsPid = natsServerPid();
  let service: RunningService | undefined;
  let failure: unknown;
  try {
    await cli(prefix, [
      'tenant',
      'create',
      '--slug',
      'bench',
      '--name',
      'Bench OTT',
      '--plan',
      'enterprise',
      '--owner-email',
      `owner@${prefix}.test`,
      '--owner-password',
      'correct horse battery',
    ]);
    await cli(prefix, [
      'tenant',
      'update',
      '--slug',
      'bench',
      '--rate-per-minute',
      '1000000000000',
      '--monthly-quota',
      '1000000000000000',
    ]);
    const key = String(
      (await cli(prefix, ['apikey', 'create', '--tenant', 'bench', '--name', 'bench', '--environment', 'production']))
        .key,
    );
    const lua: Record<Scenario, string> = { batch: join(dir, 'batch.lua'), single: join(dir, 'single.lua'), cmcd: '' };
    writeFileSync(lua.batch, luaScript(files.batch, key));
    writeFileSync(lua.single, luaScript(files.single, key));

    for (const engine of o.engines) {
      service = await startService(prefix, engine, dir);
      for (const scenario of o.scenarios) {
        const connections = scenario === 'single' ? o.singleConnections : o.batchConnections;
        const eventsPerRequest = scenario === 'single' ? 1 : 500;
        if (o.warmup > 0)
          await drive(tool, service.port, key, scenario, files[scenario], lua[scenario], connections, o.warmup);
        await sleep(500);
        const before = await scrape(service.port);
        const cpuBefore = cpuSample(service.child.pid, natsPid);
        const load = await drive(
          tool,
          service.port,
          key,
          scenario,
          files[scenario],
          lua[scenario],
          connections,
          o.duration,
        );
        const cpu = cpuShares(cpuBefore, cpuSample(service.child.pid, natsPid));
        await sleep(500); // let requests still in flight when the load stopped be answered
        const after = await scrape(service.port);
        const serverStatuses: Record<string, number> = {};
        for (const [s, n] of Object.entries(after.statuses))
          if (n - (before.statuses[s] ?? 0) > 0) serverStatuses[s] = n - (before.statuses[s] ?? 0);
        const server200 = serverStatuses['200'] ?? 0;
        const serverAccepted = after.accepted - before.accepted;
        const errorsTotal = Object.values(load.errors).reduce((a, b) => a + b, 0);
        const all200 =
          errorsTotal === 0 &&
          Object.keys(serverStatuses).every((s) => s === '200') &&
          server200 >= load.requests &&
          serverAccepted === server200 * eventsPerRequest &&
          after.rejected === before.rejected &&
          after.failedPublishes === before.failedPublishes;
        const messages = after.messages - before.messages;
        const r: ScenarioResult = {
          engine,
          scenario,
          eventsPerRequest,
          load,
          requestsPerSecond: load.requests / load.seconds,
          eventsPerSecond: (load.requests * eventsPerRequest) / load.seconds,
          serverStatuses,
          serverAccepted,
          eventsPerMessage: messages > 0 ? (after.messageEvents - before.messageEvents) / messages : 0,
          all200,
          cpu: { service: cpu.service, nats: cpu.nats, rest: cpu.rest },
          serviceCpuUsPerRequest: ((cpu.service * cpu.seconds) / load.requests) * 1e6,
        };
        results.push(r);
        out(
          `\n${engine} / ${scenarioName[scenario]} (${connections} connections): ${fmt(r.requestsPerSecond)} req/s, ${fmt(r.eventsPerSecond)} events/s, ` +
            `p50 ${ms(load.latencyUs.p50)} ms, p99 ${ms(load.latencyUs.p99)} ms`,
        );
        out(
          `  answers: ${fmt(load.requests)} counted by ${tool}, errors ${JSON.stringify(load.errors)}; server: ${JSON.stringify(serverStatuses)}, ` +
            `${fmt(serverAccepted)} events accepted, ${r.eventsPerMessage.toFixed(1)} events per JetStream message, by ${load.tool} → ${all200 ? 'every answer 200' : 'NOT ALL 200'}`,
        );
        out(
          `  CPU (cores): ingest ${pct(cpu.service)}, nats-server ${pct(cpu.nats)}, everything else ${pct(cpu.rest)} (load generator included); ` +
            `ingest ${r.serviceCpuUsPerRequest.toFixed(1)} µs CPU per request`,
        );
        await purgeEvents(prefix);
      }
      await stopService(service);
      service = undefined;
    }
  } catch (err) {
    failure = err;
  } finally {
    if (service) await stopService(service).catch(() => undefined);
    const removed = await removeNamespace(natsUrl, prefix).catch((err: Error) => [`(cleanup failed: ${err.message})`]);
    out(`\nRemoved NATS streams: ${removed.join(', ') || '(none)'}`);
    rmSync(dir, { recursive: true, force: true });
  }
  if (failure) throw failure as Error;

  // Summary.
  const find = (engine: string, scenario: string): ScenarioResult | undefined =>
    results.find((r) => r.engine === engine && r.scenario === scenario);
  out('\nSummary');
  out(
    '| engine | scenario | connections | requests/s | events/s (JetStream-acked) | p50 ms | p99 ms | all 200 | ingest CPU | ingest CPU µs/request | nats-server CPU | other CPU |',
  );
  out('|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|');
  for (const r of results) {
    out(
      `| ${r.engine} | ${scenarioName[r.scenario]} | ${r.load.connections} | ${fmt(r.requestsPerSecond)} | ${fmt(r.eventsPerSecond)} | ` +
        `${ms(r.load.latencyUs.p50)} | ${ms(r.load.latencyUs.p99)} | ${r.all200 ? 'yes' : 'NO'} | ${pct(r.cpu.service)} | ${r.serviceCpuUsPerRequest.toFixed(1)} | ${pct(r.cpu.nats)} | ${pct(r.cpu.rest)} |`,
    );
  }
  out(
    `\nBare JSON.parse (one core): ${fmt(parse.batch.eventsPerSecond)} events/s over the batch bodies, ${fmt(parse.single.eventsPerSecond)} over the 1-event bodies`,
  );
  let ok = results.every((r) => r.all200);
  for (const engine of o.engines) {
    const b = find(engine, 'batch');
    if (b) {
      const ratio = b.eventsPerSecond / parse.batch.eventsPerSecond;
      const met = ratio >= 0.5;
      out(
        `Batch 500 on ${engine}: ${fmt(b.eventsPerSecond)} ÷ ${fmt(parse.batch.eventsPerSecond)} = ${(ratio * 100).toFixed(1)}% of the bare parse rate (target ≥ 50%: ${met ? 'met' : 'MISSED'})`,
      );
      if (engine === 'uws') ok &&= met;
    }
    const c = find(engine, 'cmcd');
    if (b && c) {
      out(
        `CMCD on ${engine}: ${fmt(c.eventsPerSecond)} reports/s against ${fmt(b.eventsPerSecond)} events/s as JSON, the same events in the same run ` +
          `(${((c.eventsPerSecond / b.eventsPerSecond) * 100).toFixed(0)}%; ingest CPU per request ${c.serviceCpuUsPerRequest.toFixed(0)} against ${b.serviceCpuUsPerRequest.toFixed(0)} µs)`,
      );
    }
    const s = find(engine, 'single');
    if (s) {
      const met = s.requestsPerSecond >= 60_000;
      out(
        `1-event requests on ${engine}: ${fmt(s.requestsPerSecond)} req/s vs the 60,000 req/s target (${((s.requestsPerSecond / 60_000) * 100).toFixed(0)}%: ${met ? 'met' : 'MISSED'})`,
      );
      if (engine === 'uws') ok &&= met;
    }
  }
  if (o.json)
    writeFileSync(
      o.json,
      `${JSON.stringify({ machine, commit, command, tool, options: o, parse, results }, null, 2)}\n`,
    );
  out(ok ? '\nAll targets met.' : '\nSome targets missed (see above).');
}

async function parseChild(file: string, seconds: number): Promise<ParseResult> {
  const [cmd, args] = pinned(0, process.execPath, [selfJs, '--parse', file, String(seconds)]);
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`parse loop failed (${r.code}): ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as ParseResult;
}

main().then(
  () => setImmediate(() => process.exit(0)),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
