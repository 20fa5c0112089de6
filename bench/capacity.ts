// How big an event can one box follow? (npm run bench:capacity)
//
// Starts `darshak start` as a new user would (every role, as child processes by default, the embedded store, NATS at NATS_URL), an
// enterprise tenant with its rate raised, and an open-loop generator in a child process: viewers each send a
// heartbeat every 10 s, with starts, stalls and ends in realistic proportion, batched as an edge or SDK buffer sends
// them. The audience rises step by step; for each step it reports the events sent and accepted per second, the
// answers that were not 200 by status, ingest latency, the pipeline's lag, freshness (a probe tenant's session,
// acknowledged → visible in /v1/analytics/concurrency) and CPU per process; at the end, how long the backlog took to
// drain. It prints the largest audience held with freshness p99 ≤ 2 s and no 5xx.
//
//   npm run bench:capacity [-- --steps 50000,100000,200000,300000,400000,500000 --step-seconds 40 --batch 500
//                              --box-processes roles|one]
//
// Environment: NATS_URL (default nats://127.0.0.1:4222); BENCH_SERVICE_NODE_ARGS adds node flags to the service
// (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
//
// Open loop: requests go out on schedule whatever the answers, and a refused request is not sent again (a real
// client would retry after Retry-After; here the offered load stays what the step says).

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
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
  processTree,
  scrapeMetrics,
  sleep,
  threadCpu,
} from './host.js';

const selfJs = fileURLToPath(import.meta.url);

// ---------------------------------------------------------------------------------------------------------------
// The generator (child mode): viewers of one tenant, open loop.

interface GeneratorSpec {
  url: string;
  key: string;
  batch: number;
}

/** One second of the generator's answers. */
interface GeneratorSecond {
  sent: number;
  requests: number;
  statuses: Record<string, number>;
  accepted: number;
  latencies: number[];
  /** Requests not sent: too many were outstanding (the generator, not the service, was the limit). */
  skipped: number;
}

const regions = [
  'Maharashtra',
  'Delhi',
  'Karnataka',
  'Tamil Nadu',
  'Uttar Pradesh',
  'West Bengal',
  'Gujarat',
  'Telangana',
];
const devices = ['mobile', 'mobile', 'mobile', 'tv', 'desktop', 'tablet'];
const contents = ['ind-vs-aus-final', 'ind-vs-aus-final', 'ind-vs-aus-final', 'highlights-day-1', 'post-match-show'];

async function generator(spec: GeneratorSpec): Promise<void> {
  const url = new URL(spec.url);
  // Idle sockets are closed here before the server's keep-alive timeout (uWebSockets.js: 10 s) closes them: a request
  // sent on a socket the server is closing fails with ECONNRESET, the generator's fault, not the service's.
  const agent = new Agent({ keepAlive: true, maxSockets: 256, scheduling: 'lifo', timeout: 5000 });
  let viewers = 0;
  // Per viewer: its session number (0: not started yet) and whether a stall is open.
  let session = new Uint32Array(0);
  let stalled = new Uint8Array(0);
  let cursor = 0;
  let rnd = 0x5eed;
  const random = (): number => {
    rnd = (Math.imul(rnd, 1664525) + 1013904223) >>> 0;
    return rnd / 4294967296;
  };
  let second: GeneratorSecond = { sent: 0, requests: 0, statuses: {}, accepted: 0, latencies: [], skipped: 0 };
  let outstanding = 0;
  let pending: string[] = [];

  const post = (events: string[]): void => {
    second.requests++;
    if (outstanding >= 2048) {
      second.skipped++;
      return;
    }
    second.sent += events.length;
    outstanding++;
    const body = `{"events":[${events.join(',')}]}`;
    const started = performance.now();
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': spec.key,
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          outstanding--;
          const status = String(res.statusCode);
          second.statuses[status] = (second.statuses[status] ?? 0) + 1;
          second.latencies.push(performance.now() - started);
          if (res.statusCode === 200)
            second.accepted += (JSON.parse(Buffer.concat(chunks).toString()) as { accepted: number }).accepted;
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      outstanding--;
      const what = `error ${err.code ?? err.message}`;
      second.statuses[what] = (second.statuses[what] ?? 0) + 1;
    });
    req.end(body);
  };

  const push = (event: string): void => {
    pending.push(event);
    if (pending.length >= spec.batch) {
      post(pending);
      pending = [];
    }
  };

  /** The next event of viewer `v`: a start, a heartbeat, a stall or its end, or an end and a new session. */
  const next = (v: number): void => {
    const s = `v${v}-${session[v]}`;
    if (session[v] === 0 || random() < 1 / 120) {
      // A session of 20 minutes on average (a heartbeat every 10 s): its end, then the viewer's next session.
      if (session[v] !== 0) push(`{"event_type":"session_end","session_id":"${s}"}`);
      session[v]!++;
      const n = `v${v}-${session[v]}`;
      const ctx = `{"device_type":"${devices[v % devices.length]}","region":"${regions[v % regions.length]}","country":"IN","cdn":"cdn-${v % 3}","pop":"pop-${v % 7}"}`;
      push(
        `{"event_type":"play_start","session_id":"${n}","anonymous_id":"a${v}","content_id":"${contents[v % contents.length]}","content_type":"live","context":${ctx}}`,
      );
      push(`{"event_type":"first_frame","session_id":"${n}"}`);
      stalled[v] = 0;
      return;
    }
    if (stalled[v]) {
      push(`{"event_type":"rebuffer_end","session_id":"${s}"}`);
      stalled[v] = 0;
    } else if (random() < 0.01) {
      push(`{"event_type":"rebuffer_start","session_id":"${s}"}`);
      stalled[v] = 1;
      return;
    }
    push(
      `{"event_type":"heartbeat","session_id":"${s}","position_sec":${Math.floor(random() * 7200)},"bitrate_kbps":4500}`,
    );
  };

  process.stdin.setEncoding('utf8');
  let input = '';
  process.stdin.on('data', (d: string) => {
    input += d;
    let nl: number;
    while ((nl = input.indexOf('\n')) >= 0) {
      const want = Number(input.slice(0, nl));
      input = input.slice(nl + 1);
      if (want > session.length) {
        const s = new Uint32Array(want);
        s.set(session);
        session = s;
        const st = new Uint8Array(want);
        st.set(stalled);
        stalled = st;
      }
      viewers = want;
    }
  });
  process.stdin.on('end', () => process.exit(0));

  // Every 100 ms a tenth of a second's share of the viewers: each one's next event every 10 s.
  const tickMs = 100;
  let owed = 0;
  setInterval(() => {
    if (viewers === 0) return;
    owed += (viewers * tickMs) / 10_000;
    for (; owed >= 1; owed--) {
      next(cursor);
      cursor = (cursor + 1) % viewers;
    }
    if (spec.batch > 1 && pending.length > 0 && pending.length >= spec.batch / 2) {
      post(pending);
      pending = [];
    }
  }, tickMs);
  setInterval(() => {
    process.stdout.write(`${JSON.stringify(second)}\n`);
    second = { sent: 0, requests: 0, statuses: {}, accepted: 0, latencies: [], skipped: 0 };
  }, 1000);
}

// ---------------------------------------------------------------------------------------------------------------
// The run.

interface Options {
  steps: number[];
  stepSeconds: number;
  batch: number;
  /** `darshak start`'s layout (BOX_PROCESSES): the roles as child processes, or all in one. */
  boxProcesses: 'roles' | 'one';
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      steps: { type: 'string' },
      'step-seconds': { type: 'string' },
      batch: { type: 'string' },
      'box-processes': { type: 'string' },
    },
    strict: true,
  });
  const steps = (values.steps ?? '50000,100000,200000,300000,400000,500000').split(',').map(Number);
  const stepSeconds = Number(values['step-seconds'] ?? 40);
  const batch = Number(values.batch ?? 500);
  if (steps.some((s) => !(s > 0)) || !(stepSeconds >= 15) || !(batch >= 1 && batch <= 500)) {
    throw new Error('--steps takes viewer counts above 0, --step-seconds at least 15, --batch 1 to 500');
  }
  const boxProcesses = values['box-processes'] ?? 'roles';
  if (boxProcesses !== 'roles' && boxProcesses !== 'one') throw new Error('--box-processes takes roles or one');
  return { steps, stepSeconds, batch, boxProcesses };
}

const quantile = (xs: number[], q: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

interface Metrics {
  accepted: number;
  passed: number;
  duplicates: number;
  stored: number;
  lag: number;
  shed: number;
  /** Rows written to the store, by table. */
  rows: Record<string, number>;
}

async function scrape(port: number): Promise<Metrics> {
  const samples = await scrapeMetrics(port);
  const value = (name: string, label?: [string, string]): number =>
    samples.find((s) => s.name === name && (label === undefined || s.labels[label[0]] === label[1]))?.value ?? 0;
  return {
    accepted: value('darshak_ingest_events_total', ['outcome', 'accepted']),
    passed: value('darshak_aggregate_events_total', ['outcome', 'passed']),
    duplicates: value('darshak_aggregate_events_total', ['outcome', 'duplicate']),
    stored: value('darshak_flush_rows_total', ['table', 'events']),
    lag: value('darshak_ingest_pipeline_lag_seconds'),
    shed: value('darshak_ingest_shed_requests_total'),
    rows: Object.fromEntries(
      samples.filter((s) => s.name === 'darshak_flush_rows_total').map((s) => [s.labels.table ?? '', s.value]),
    ),
  };
}

/**
 * Freshness: every second a probe tenant starts one more session and keeps all of its sessions playing, so its
 * concurrency is k once probe k is counted. Each probe's time from its 200 to the first poll of
 * /v1/analytics/concurrency that counts it, and to the first /v1/live push that does (the live feed pushes the
 * second two seconds behind now, by design: api.md).
 */
class Probe {
  private k = 0;
  /** When each probe was acknowledged (NaN: it was not). */
  readonly acked: number[] = [];
  readonly freshness: Array<{ at: number; ms: number }> = [];
  readonly liveFreshness: Array<{ at: number; ms: number }> = [];
  private visible = 0;
  private liveVisible = 0;
  private socket: WebSocket | undefined;
  private stopped = false;
  private sending = true;
  private readonly loops: Array<Promise<void>> = [];

  constructor(
    private readonly ingestUrl: string,
    private readonly baseUrl: string,
    private readonly key: string,
    private readonly token: string,
  ) {}

  start(): void {
    this.loops.push(this.send(), this.poll());
    this.socket = new WebSocket(`${this.baseUrl.replace(/^http/, 'ws')}/v1/live?token=${this.token}`, 'darshak.v1');
    this.socket.on('message', (data) => {
      const m = JSON.parse((data as Buffer).toString()) as { type: string; value?: number };
      if (m.type !== 'concurrency' || m.value === undefined) return;
      this.liveVisible = this.seen(this.liveVisible, m.value, this.liveFreshness);
    });
    this.socket.on('error', () => undefined);
  }

  /** Probes up to `count` counted now (those after `before`): their freshness into `into`; answers the new mark. */
  private seen(before: number, count: number, into: Array<{ at: number; ms: number }>): number {
    const now = Date.now();
    for (let k = before + 1; k <= Math.min(count, 490); k++) {
      const at = this.acked[k];
      if (at !== undefined && !Number.isNaN(at)) into.push({ at, ms: now - at });
    }
    return Math.max(before, count);
  }

  private async send(): Promise<void> {
    while (!this.stopped && this.sending) {
      const k = ++this.k;
      const events = [
        {
          event_type: 'play_start',
          session_id: `p${k}`,
          anonymous_id: `p${k}`,
          content_id: 'probe',
          context: { device_type: 'desktop', region: 'Delhi', country: 'IN' },
        },
      ];
      // Sessions older than the 490 kept playing are let go; the count then stops rising, and so does the probe.
      for (let j = Math.max(1, k - 490); j < k; j++)
        events.push({ event_type: 'heartbeat', session_id: `p${j}` } as (typeof events)[number]);
      const started = Date.now();
      const res = await fetch(`${this.ingestUrl}/v1/ingest/events`, {
        method: 'POST',
        headers: { 'x-api-key': this.key, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      }).catch(() => null);
      this.acked[k] = res?.status === 200 ? Date.now() : NaN;
      await sleep(Math.max(0, 1000 - (Date.now() - started)));
    }
  }

  private async poll(): Promise<void> {
    while (!this.stopped) {
      const res = await fetch(`${this.baseUrl}/v1/analytics/concurrency?range=24h&interval=1`, {
        headers: { authorization: `Bearer ${this.token}` },
      }).catch(() => null);
      if (res?.ok) {
        const { points } = (await res.json()) as { points: Array<{ value: number }> };
        this.visible = this.seen(this.visible, Math.max(0, ...points.slice(-3).map((p) => p.value)), this.freshness);
      }
      await sleep(200);
    }
  }

  /**
   * No more probes; the polls go on, for the probes already sent. The drain after the load waits for the store to
   * hold everything accepted, which a probe every second would keep from ever being true at a slower flush cadence.
   */
  stopSending(): void {
    this.sending = false;
  }

  /** Until every probe acknowledged has been counted by both the polls and the live feed, or `ms` passed. */
  async settle(ms: number): Promise<void> {
    const last = this.acked.findLastIndex((at) => at !== undefined && !Number.isNaN(at));
    const until = Date.now() + ms;
    while (Date.now() < until && Math.min(this.visible, this.liveVisible, 490) < Math.min(last, 490)) await sleep(200);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.socket?.close();
    await Promise.all(this.loops);
  }
}

interface StepResult {
  viewers: number;
  offered: number;
  sentPerSecond: number;
  acceptedPerSecond: number;
  statuses: Record<string, number>;
  skipped: number;
  p50: number;
  p99: number;
  maxLag: number;
  /** Probes acknowledged in the step's measured window: when the run ends, each one's freshness (Infinity: never seen). */
  probesFrom: number;
  probesTo: number;
  freshP50: number;
  freshP99: number;
  freshCount: number;
  liveP50: number;
  liveP99: number;
  /** `each`: the service's processes' (`tree`), in its order. */
  cpu: { service: number; each: number[]; nats: number; generator: number; machine: number };
  /** The service's CPU by thread group (host.ts `threadCpu`), cores. */
  threads: Record<'loop' | 'merges' | 'store' | 'node', number>;
  /** Rows written to the store per second, by table. */
  rows: Record<string, number>;
}

async function main(): Promise<void> {
  const opts = options(process.argv.slice(2));
  const prefix = `cap${Date.now().toString(36)}`;
  const dir = mkdtempSync(join(tmpdir(), 'darshak-capacity-'));
  const [basePort, ingestPort] = [await freePort(), await freePort()];
  const logFile = join(dir, 'service.log');
  const log = createWriteStream(logFile);
  const nodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const service = spawn(process.execPath, [...nodeArgs, mainJs, 'start'], {
    env: {
      ...process.env,
      NATS_URL: natsUrl,
      NATS_PREFIX: prefix,
      NATS_AUTOSTART: 'false',
      DATA_DIR: join(dir, 'data'),
      BASE_PORT: String(basePort),
      INGEST_PORT: String(ingestPort),
      LOG_LEVEL: 'warn',
      BOX_PROCESSES: opts.boxProcesses,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  service.stdout.pipe(log);
  service.stderr.pipe(log);
  const children: ChildProcess[] = [service];
  const cleanup = async (): Promise<void> => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await removeNamespace(prefix, natsUrl).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ingestUrl = `http://127.0.0.1:${ingestPort}`;
    const baseUrl = `http://127.0.0.1:${basePort}`;
    for (let i = 0; ; i++) {
      const ok = await Promise.all(
        [ingestUrl, baseUrl].map((u) =>
          fetch(`${u}/readyz`)
            .then((r) => r.ok)
            .catch(() => false),
        ),
      );
      if (ok.every(Boolean)) break;
      if (i > 600 || service.exitCode !== null)
        throw new Error(`the service did not start:\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
      await sleep(100);
    }
    await cli(prefix, [
      'tenant',
      'create',
      '--slug',
      'final',
      '--name',
      'Final',
      '--plan',
      'enterprise',
      '--owner-email',
      'load@final.test',
      '--owner-password',
      'capacity-bench-1',
    ]);
    await cli(prefix, ['tenant', 'update', '--slug', 'final', '--rate-per-minute', '1000000000']);
    const key = String(
      (await cli(prefix, ['apikey', 'create', '--tenant', 'final', '--name', 'load', '--environment', 'production']))
        .key,
    );
    await cli(prefix, [
      'tenant',
      'create',
      '--slug',
      'probe',
      '--name',
      'Probe',
      '--plan',
      'pro',
      '--owner-email',
      'probe@final.test',
      '--owner-password',
      'capacity-bench-1',
    ]);
    const probeKey = String(
      (await cli(prefix, ['apikey', 'create', '--tenant', 'probe', '--name', 'probe', '--environment', 'production']))
        .key,
    );
    const login = (await (
      await fetch(`${baseUrl}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'probe@final.test', password: 'capacity-bench-1' }),
      })
    ).json()) as { access_token: string };

    const gen = spawn(
      process.execPath,
      [
        selfJs,
        '--generator',
        JSON.stringify({ url: `${ingestUrl}/v1/ingest/events`, key, batch: opts.batch } satisfies GeneratorSpec),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    children.push(gen);
    const seconds: GeneratorSecond[] = [];
    let buffered = '';
    gen.stdout.setEncoding('utf8');
    gen.stdout.on('data', (d: string) => {
      buffered += d;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        seconds.push(JSON.parse(buffered.slice(0, nl)) as GeneratorSecond);
        buffered = buffered.slice(nl + 1);
      }
    });
    const probe = new Probe(ingestUrl, baseUrl, probeKey, login.access_token);
    probe.start();
    const natsPid = natsServerPid();
    // The service is `darshak start` and, in the roles layout, the child process of each group of roles it runs.
    const tree = processTree(service.pid).map(({ pid, command }) => ({
      pid,
      label: /--role (\S+)/.exec(command)?.[1] ?? (opts.boxProcesses === 'roles' ? 'supervisor' : 'all roles'),
    }));
    const cpu = () => {
      const each = tree.map((p) => processCpu(p.pid));
      const threads = tree.map((p) => threadCpu(p.pid));
      return {
        service: each.reduce((a, b) => a + b, 0),
        each,
        nats: processCpu(natsPid),
        generator: processCpu(gen.pid),
        machine: machineCpu(),
        threads: {
          loop: threads.reduce((a, t) => a + t.loop, 0),
          merges: threads.reduce((a, t) => a + t.merges, 0),
          store: threads.reduce((a, t) => a + t.store, 0),
          node: threads.reduce((a, t) => a + t.node, 0),
        },
      };
    };

    console.log(
      `Darshak capacity benchmark: one \`darshak start\` (every role, embedded store; BOX_PROCESSES=${opts.boxProcesses}), viewers with a heartbeat every 10 s`,
    );
    console.log(
      `  machine: ${cpuModel()}, Node ${process.version}, nats-server ${await natsServerVersion()}; commit ${gitCommit()}`,
    );
    console.log(
      `  batch ${opts.batch} events per request; ${opts.stepSeconds} s per step, rates over its last ${opts.stepSeconds - 10} s`,
    );
    const results: StepResult[] = [];
    for (const viewers of opts.steps) {
      gen.stdin.write(`${viewers}\n`);
      const from = seconds.length;
      // The first 10 s of a step start the new viewers' sessions: rates are taken over the rest.
      await sleep(10_000);
      const measuredFrom = seconds.length;
      const cpu0 = cpu();
      const rows0 = (await scrape(ingestPort).catch(() => null))?.rows ?? {};
      const t0 = Date.now();
      let maxLag = 0;
      while (Date.now() - t0 < (opts.stepSeconds - 10) * 1000) {
        await sleep(1000);
        maxLag = Math.max(maxLag, (await scrape(ingestPort).catch(() => null))?.lag ?? 0);
      }
      const cpu1 = cpu();
      const rows1 = (await scrape(ingestPort).catch(() => null))?.rows ?? {};
      const span = (Date.now() - t0) / 1000;
      const window = seconds.slice(measuredFrom);
      const all = seconds.slice(from);
      const statuses: Record<string, number> = {};
      for (const s of all)
        for (const [k, n] of Object.entries(s.statuses)) if (k !== '200') statuses[k] = (statuses[k] ?? 0) + n;
      const r: StepResult = {
        viewers,
        offered: viewers / 10,
        sentPerSecond: window.reduce((a, s) => a + s.sent, 0) / window.length,
        acceptedPerSecond: window.reduce((a, s) => a + s.accepted, 0) / window.length,
        statuses,
        skipped: all.reduce((a, s) => a + s.skipped, 0),
        p50: quantile(
          all.flatMap((s) => s.latencies),
          0.5,
        ),
        p99: quantile(
          all.flatMap((s) => s.latencies),
          0.99,
        ),
        maxLag,
        probesFrom: t0,
        probesTo: t0 + span * 1000,
        freshP50: NaN,
        freshP99: NaN,
        freshCount: 0,
        liveP50: NaN,
        liveP99: NaN,
        cpu: {
          service: (cpu1.service - cpu0.service) / span,
          each: cpu1.each.map((c, i) => (c - cpu0.each[i]!) / span),
          nats: (cpu1.nats - cpu0.nats) / span,
          generator: (cpu1.generator - cpu0.generator) / span,
          machine: (cpu1.machine - cpu0.machine) / span,
        },
        threads: {
          loop: (cpu1.threads.loop - cpu0.threads.loop) / span,
          merges: (cpu1.threads.merges - cpu0.threads.merges) / span,
          store: (cpu1.threads.store - cpu0.threads.store) / span,
          node: (cpu1.threads.node - cpu0.threads.node) / span,
        },
        rows: Object.fromEntries(Object.entries(rows1).map(([table, n]) => [table, (n - (rows0[table] ?? 0)) / span])),
      };
      results.push(r);
      console.log(
        `  ${viewers.toLocaleString('en')} viewers: sent ${Math.round(r.sentPerSecond).toLocaleString('en')}/s, accepted ${Math.round(r.acceptedPerSecond).toLocaleString('en')}/s, not 200 ${JSON.stringify(statuses)}, ` +
          `ingest p50 ${r.p50.toFixed(0)} ms p99 ${r.p99.toFixed(0)} ms, lag ≤ ${maxLag.toFixed(1)} s, ` +
          `CPU service ${(r.cpu.service * 100).toFixed(0)}% nats ${(r.cpu.nats * 100).toFixed(0)}% generator ${(r.cpu.generator * 100).toFixed(0)}%`,
      );
    }
    gen.stdin.write('0\n');
    probe.stopSending();
    const stopAt = Date.now();
    let drainedAfter = NaN;
    for (let i = 0; i < 600; i++) {
      const m = await scrape(ingestPort).catch(() => null);
      if (m && m.lag === 0 && m.passed + m.duplicates >= m.accepted && m.stored >= m.passed) {
        drainedAfter = (Date.now() - stopAt) / 1000;
        break;
      }
      await sleep(500);
    }
    // The live feed pushes the second two seconds behind now: a drain quicker than that must not cut it off.
    await probe.settle(10_000);
    await probe.stop();
    // Freshness per step once everything drained: a probe seen late counts its whole wait, one never seen counts as
    // infinite (so a step where the pipeline fell behind cannot look fresh for what it had not shown yet).
    for (const r of results) {
      const fresh: number[] = [];
      const live: number[] = [];
      for (const at of probe.acked) {
        if (at === undefined || Number.isNaN(at) || at < r.probesFrom || at >= r.probesTo) continue;
        fresh.push(probe.freshness.find((f) => f.at === at)?.ms ?? Infinity);
        live.push(probe.liveFreshness.find((f) => f.at === at)?.ms ?? Infinity);
      }
      r.freshP50 = quantile(fresh, 0.5);
      r.freshP99 = quantile(fresh, 0.99);
      r.freshCount = fresh.length;
      r.liveP50 = quantile(live, 0.5);
      r.liveP99 = quantile(live, 0.99);
    }
    const m = await scrape(ingestPort);
    // Each warning or error by its message and, where it has one, its error's.
    const warnings = readFileSync(logFile, 'utf8')
      .split('\n')
      .flatMap((l) => {
        const msg = /"msg":"([^"]+)"/.exec(l)?.[1];
        const err = /"err":"([^"]+)"/.exec(l)?.[1] ?? /"err":\{[^}]*"message":"([^"]+)"/.exec(l)?.[1];
        return msg === undefined ? [] : [err === undefined ? msg : `${msg} (${err})`];
      })
      .reduce<Record<string, number>>((acc, msg) => ({ ...acc, [msg]: (acc[msg] ?? 0) + 1 }), {});

    console.log('');
    console.log(
      '| viewers | events/s offered | sent/s | accepted/s | not 200 | ingest p50 / p99 | max lag | freshness p50 / p99 (probes) | /v1/live p50 / p99 | CPU service / nats / generator |',
    );
    console.log('|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|');
    const n = (x: number): string => Math.round(x).toLocaleString('en');
    for (const r of results) {
      const not200 =
        Object.entries(r.statuses)
          .map(([k, v]) => `${v} × ${k}`)
          .join(', ') || '0';
      console.log(
        `| ${n(r.viewers)} | ${n(r.offered)} | ${n(r.sentPerSecond)} | ${n(r.acceptedPerSecond)} | ${not200}${r.skipped ? ` (+${r.skipped} not sent)` : ''} | ${r.p50.toFixed(0)} ms / ${r.p99.toFixed(0)} ms | ${r.maxLag.toFixed(1)} s | ` +
          `${(r.freshP50 / 1000).toFixed(2)} s / ${(r.freshP99 / 1000).toFixed(2)} s (${r.freshCount}) | ${(r.liveP50 / 1000).toFixed(2)} s / ${(r.liveP99 / 1000).toFixed(2)} s | ${(r.cpu.service * 100).toFixed(0)}% / ${(r.cpu.nats * 100).toFixed(0)}% / ${(r.cpu.generator * 100).toFixed(0)}% |`,
      );
    }
    console.log('');
    console.log(
      'Where the service\u2019s CPU went (cores; host.ts `threadCpu`), and what it wrote to the store (rows per accepted event):',
    );
    console.log('');
    console.log(
      '| viewers | event loop | libuv and V8 threads | store statements | store merges | µs CPU per accepted event | rows/event | of which events / session_hours / viewer_windows / content |',
    );
    console.log('|---:|---:|---:|---:|---:|---:|---:|---|');
    for (const r of results) {
      const th = r.threads;
      const total = Object.values(r.rows).reduce((a, b) => a + b, 0);
      const per = (t: string): string =>
        (r.rows[t] ?? 0) / r.acceptedPerSecond >= 0.005 ? ((r.rows[t] ?? 0) / r.acceptedPerSecond).toFixed(2) : '0';
      const content = ((r.rows.content_minute_sums ?? 0) + (r.rows.content_catalog ?? 0)) / r.acceptedPerSecond;
      console.log(
        `| ${n(r.viewers)} | ${(th.loop * 100).toFixed(0)}% | ${(th.node * 100).toFixed(0)}% | ${(th.store * 100).toFixed(0)}% | ${(th.merges * 100).toFixed(0)}% | ` +
          `${((r.cpu.service * 1e6) / r.acceptedPerSecond).toFixed(0)} | ${(total / r.acceptedPerSecond).toFixed(2)} | ${per('events')} / ${per('session_hours')} / ${per('viewer_windows')} / ${content.toFixed(2)} |`,
      );
    }
    console.log('');
    console.log('CPU per accepted event by process of the service (µs), beside the budget of issue 58:');
    console.log('');
    const budget: Record<string, string> = {
      ingest: '≤ 5',
      aggregate: '≤ 4',
      'flush,api,alerts,webhooks': '≤ 15 (store)',
    };
    console.log(
      `| viewers | ${tree.map((p) => `${p.label} (budget ${budget[p.label] ?? '–'})`).join(' | ')} | nats + generator (rest) |`,
    );
    console.log(`|---:|${tree.map(() => '---:|').join('')}---:|`);
    for (const r of results) {
      const us = (cores: number): string => ((cores * 1e6) / r.acceptedPerSecond).toFixed(1);
      console.log(`| ${n(r.viewers)} | ${r.cpu.each.map(us).join(' | ')} | ${us(r.cpu.nats + r.cpu.generator)} |`);
    }
    console.log('');
    console.log(
      `Drained after the load stopped: ${Number.isNaN(drainedAfter) ? 'not within 5 minutes' : `${drainedAfter.toFixed(1)} s`}; accepted ${n(m.accepted)}, aggregated ${n(m.passed + m.duplicates)}, stored ${n(m.stored)}; requests shed ${n(m.shed)}`,
    );
    console.log(`Service log, warnings and errors by message: ${JSON.stringify(warnings)}`);
    const held = results.filter(
      (r) =>
        r.freshP99 <= 2000 &&
        !Object.keys(r.statuses).some((s) => s.startsWith('5') || s.startsWith('error')) &&
        r.skipped === 0,
    );
    const best = held.length > 0 ? Math.max(...held.map((r) => r.viewers)) : 0;
    const withinIngest = held.filter((r) => r.p99 <= 250);
    console.log(
      `Largest audience held (freshness p99 ≤ 2 s, no 5xx): ${best.toLocaleString('en')} viewers (${(best / 10).toLocaleString('en')} events/s)`,
    );
    console.log(
      `  of those also with ingest p99 ≤ 250 ms: ${withinIngest.length > 0 ? Math.max(...withinIngest.map((r) => r.viewers)).toLocaleString('en') : 0} viewers`,
    );
    console.log('  target: 500,000 viewers (50,000 events/s) with freshness p99 ≤ 2 s, ingest p99 ≤ 250 ms and no 5xx');
    gen.stdin.end();
    service.kill('SIGTERM');
    await new Promise((r) => service.once('exit', r));
  } finally {
    await cleanup();
  }
}

if (process.argv[2] === '--generator') void generator(JSON.parse(process.argv[3]!) as GeneratorSpec);
else
  await main().catch((err: Error) => {
    console.error(err.stack ?? err.message);
    process.exitCode = 1;
  });
