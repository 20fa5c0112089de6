// What the benchmarks share about the machine they run on and the service they start: CPU accounting from /proc
// (so a figure taken on a busy machine says so), the machine's and the commit's names, free ports, the CLI.

import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from 'nats';

// The repository: two levels up from dist/bench/host.js, one from bench/host.ts (a test runs the source).
export const root = fileURLToPath(
  new URL(import.meta.url.includes('/dist/bench/') ? '../../' : '../', import.meta.url),
);
export const mainJs = join(root, 'dist/src/main.js');
export const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** True once `check` is, trying every `every` ms for about `ms`. */
export async function poll(check: () => Promise<boolean>, ms: number, every: number): Promise<boolean> {
  for (const end = Date.now() + ms; ; await sleep(every)) {
    if (await check()) return true;
    if (Date.now() > end) return false;
  }
}

export function run(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** One sample of a service's Prometheus text (`/metrics`). */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample a listener's `/metrics` serves. */
export async function scrapeMetrics(port: number): Promise<MetricSample[]> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const samples: MetricSample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN)$/.exec(line);
    if (!m) continue;
    const [, name = '', labelText = '', valueText] = m;
    samples.push({
      name,
      labels: Object.fromEntries([...labelText.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!])),
      value: Number(valueText),
    });
  }
  return samples;
}

/** A `darshak` CLI command in the namespace `prefix`; its JSON answer. */
export async function cli(prefix: string, args: string[]): Promise<Record<string, unknown>> {
  const r = await run(process.execPath, [mainJs, ...args], {
    NATS_PREFIX: prefix,
    NATS_URL: natsUrl,
    LOG_LEVEL: 'warn',
  });
  if (r.code !== 0) throw new Error(`darshak ${args.slice(0, 2).join(' ')} failed (${r.code}): ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

/** A free port: any the system gives, or with `stable` one below Linux's ephemeral range (see below). */
export async function freePort(stable = false): Promise<number> {
  for (;;) {
    // A server that is stopped and started again keeps its port. Its clients, reconnecting meanwhile, take source
    // ports from the ephemeral range (32768 and up); one that picks the listener's own port connects to itself (a
    // TCP self-connect) and holds the port, so the restart fails to bind. Ports below the range cannot be taken so.
    const wanted = stable ? 20_000 + Math.floor(Math.random() * 12_000) : 0;
    const port = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(-1));
      srv.listen(wanted, '127.0.0.1', () => {
        const addr = srv.address();
        srv.close(() => resolve(typeof addr === 'object' && addr !== null ? addr.port : -1));
      });
    });
    if (port > 0) return port;
  }
}

export async function natsServerVersion(): Promise<string> {
  const r = spawnSync('nats-server', ['--version'], { encoding: 'utf8' });
  if (r.status === 0 && r.stdout.trim()) return r.stdout.trim().replace(/^nats-server:\s*/, '');
  const nc = await connect({ servers: natsUrl, reconnect: false });
  const v = nc.info?.version ?? 'unknown';
  await nc.close();
  return `v${v}`;
}

export function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) return (m[1] as string).trim();
  } catch {
    // not Linux
  }
  return cpus()[0]?.model ?? 'unknown';
}

export function gitCommit(): string {
  const r = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' });
  return r.stdout.trim() + (dirty.status === 0 && dirty.stdout.trim() !== '' ? ' (+ uncommitted changes)' : '');
}

// CPU accounting from /proc (Linux), so a figure taken on a busy machine says so.

export const clockTicks = ((): number => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return r.status === 0 && n > 0 ? n : 100;
})();

/** User plus system CPU seconds in a /proc `stat` line (of a process or a thread); the name may hold spaces. */
function statCpu(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

/** CPU seconds a process has used, or NaN when /proc cannot tell. */
export function processCpu(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    return statCpu(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return NaN;
  }
}

/** A process and its child processes (a `darshak start` box supervises one per group of roles), each with its command line. */
export function processTree(pid: number | undefined): Array<{ pid: number; command: string }> {
  if (pid === undefined) return [];
  const out: Array<{ pid: number; command: string }> = [];
  const visit = (p: number): void => {
    let command = '';
    try {
      command = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      return;
    }
    out.push({ pid: p, command });
    let kids: string[] = [];
    try {
      kids = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    } catch {
      return;
    }
    for (const k of kids) visit(Number(k));
  };
  visit(pid);
  return out;
}

/**
 * CPU seconds of a process's threads, by what they do: its event loop (the thread whose id is the process's), the
 * embedded store's merges (ClickHouse names them `MergeMutate`), its other named pools (`ThreadPool`, `BgSchPool`,
 * ...: statements), and the rest (`node`: libuv's pool, where chdb runs each statement's first thread, and V8's).
 * Threads that ended since are not counted.
 */
export function threadCpu(pid: number | undefined): Record<'loop' | 'merges' | 'store' | 'node', number> {
  const out = { loop: 0, merges: 0, store: 0, node: 0 };
  if (pid === undefined) return out;
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const cpu = statCpu(stat);
      const group =
        Number(tid) === pid
          ? 'loop'
          : comm === 'MergeMutate'
            ? 'merges'
            : comm === 'node' || comm.startsWith('V8') || comm.startsWith('libuv')
              ? 'node'
              : 'store';
      out[group] += cpu;
    } catch {
      // The thread ended between listing and reading.
    }
  }
  return out;
}

/** Busy CPU seconds of the whole machine (every core), or NaN. */
export function machineCpu(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] as string;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - (v[3] ?? 0) - (v[4] ?? 0)) / clockTicks;
  } catch {
    return NaN;
  }
}

export function natsServerPid(): number | undefined {
  try {
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'nats-server') return Number(d);
      } catch {
        // gone
      }
    }
  } catch {
    // no /proc
  }
  return undefined;
}
