import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connect, type ConnectionOptions } from 'nats';
import type { Test } from 'tap';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/log.js';
import { resolveTargets, Services, startModules, type Started } from '../../src/modules.js';
import { registry } from '../../src/registry.js';
import { removeNamespace as removeStreams } from '../../src/bus/namespace.js';
import { Bus } from '../../src/bus/bus.js';
import { readInputs } from '../../src/bus/passed-events.js';
import { decodeMessage, decodeOutput, forEachPassed, type WireEvent } from '../../src/bus/wire.js';
import { busNames } from '../../src/bus/names.js';
import { outputMark } from '../../src/aggregate/shard.js';
import { checkAnswer } from './api.js';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const mainJs = `${root}dist/src/main.js`;
export const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** A namespace of its own for each test: streams, subjects and buckets never collide, and are removed after. */
export function uniquePrefix(): string {
  return `t${randomBytes(5).toString('hex')}`;
}

export function testConfig(overrides: Partial<Config> = {}): Config {
  return loadConfig({
    env: { NODE_ENV: 'test' },
    overrides: { nats_url: natsUrl, nats_prefix: uniquePrefix(), ingest_port: 0, base_port: 0, ...overrides },
  });
}

/** Remove a test's namespace; the server may already be gone (a test that stops it), which is fine. */
export async function removeNamespace(prefix: string, url = natsUrl): Promise<void> {
  await removeStreams(url, prefix).catch(() => undefined);
}

export interface Service {
  config: Config;
  started: Started;
  ingestUrl: string;
  stop(): Promise<void>;
}

/**
 * Start roles in this process, as `darshak start` would, on ephemeral ports. Ingest alone by default: roles that
 * open the embedded store need a DATA_DIR of their own (chDB admits one per process).
 */
export async function startService(overrides: Partial<Config> = {}, roles = 'ingest'): Promise<Service> {
  const config = testConfig(overrides);
  const services = new Services(config, createLogger(process.env.TEST_LOG_LEVEL ?? 'error'));
  const started = await startModules(registry, resolveTargets(registry, roles), services);
  const ingest = services.listeners.get('ingest');
  let stopped = false;
  return {
    config,
    started,
    ingestUrl: ingest ? `http://127.0.0.1:${ingest.port}` : '',
    async stop() {
      if (stopped) return;
      stopped = true;
      await started.stop();
      await removeNamespace(config.nats_prefix, config.nats_url);
    },
  };
}

/** Of each role process's log (warnings and errors), the last this many characters are kept. */
const keptLog = 64 * 1024;

/**
 * `darshak start` processes of one namespace, as an operator runs them: each with the namespace's environment plus
 * its own (ports, DATA_DIR). All are killed when the test ends.
 */
export class RoleProcesses {
  private readonly running = new Set<ChildProcess>();
  /** Every process started, with the tail of its log: printed when the test fails, to tell a flake's cause. */
  private readonly started: Array<{ label: string; p: ChildProcess; log: string }> = [];

  /** With `t`, the processes' logs are printed (to stderr) if `t` fails. */
  constructor(
    private readonly env: Record<string, string>,
    t?: Pick<Test, 'teardown' | 'passing'>,
  ) {
    t?.teardown(() => {
      if (!t.passing()) process.stderr.write(this.logs());
    });
  }

  start(args: string[], extra: Record<string, string> = {}): ChildProcess {
    const p = spawn(process.execPath, [mainJs, 'start', ...args], {
      env: { ...process.env, NODE_ENV: 'test', NATS_URL: natsUrl, LOG_LEVEL: 'warn', ...this.env, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const entry = { label: `start ${args.join(' ')}`.trim(), p, log: '' };
    const keep = (d: Buffer): void => {
      entry.log += d.toString();
      if (entry.log.length > keptLog) entry.log = entry.log.slice(-keptLog);
    };
    p.stdout.on('data', keep);
    p.stderr.on('data', keep);
    this.started.push(entry);
    this.running.add(p);
    p.once('exit', () => this.running.delete(p));
    return p;
  }

  /** The kept logs of every process started, in the order started. */
  logs(): string {
    return this.started
      .map(
        ({ label, p, log }) =>
          `--- ${label} (pid ${p.pid}, ${p.exitCode !== null ? `exit ${p.exitCode}` : (p.signalCode ?? 'running')})\n${log}`,
      )
      .join('\n');
  }

  /** Stop one: SIGKILL (a crash) or SIGTERM (a drain); resolves when it has exited. */
  async stop(p: ChildProcess, signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    if (p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill(signal);
    await exited;
  }

  async stopAll(signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    await Promise.all([...this.running].map((p) => this.stop(p, signal)));
  }
}

/** A `darshak` process as an operator runs it: its output gathered, and how it ended. */
export interface DarshakProcess {
  child: ChildProcess;
  output: () => string;
  /** The exit code, or the signal that ended it. */
  exited: Promise<number | NodeJS.Signals | null>;
}

export function darshak(args: string[], env: Record<string, string>): DarshakProcess {
  const child = spawn(process.execPath, [mainJs, ...args], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | NodeJS.Signals | null>((r) =>
    child.on('exit', (code, signal) => r(code ?? signal)),
  );
  return { child, output: () => out, exited };
}

/** Resolves once `url`/readyz answers 200 (false after `ms`). */
export async function ready(url: string, ms = 20_000): Promise<boolean> {
  return (await eventually(async () => (await fetch(`${url}/readyz`).catch(() => null))?.ok === true, ms, 100)) >= 0;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  json: Record<string, unknown> | null;
}

/** Run the real `darshak` bin (the build in dist/) against a namespace. */
export function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [mainJs, ...args], {
      env: { ...process.env, NODE_ENV: 'test', NATS_URL: natsUrl, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      let json: Record<string, unknown> | null = null;
      try {
        json = JSON.parse(stdout) as Record<string, unknown>;
      } catch {
        json = null;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

export interface Tenant {
  slug: string;
  key: string;
  keyId: string;
}

/** A tenant with an owner and a production key, made through the CLI as an operator would (`url`: another NATS). */
/** `extra`: more of the CLI's environment (its NATS credentials, say). */
export async function makeTenant(
  prefix: string,
  slug = 'acme',
  plan = 'pro',
  url = natsUrl,
  extra: Record<string, string> = {},
): Promise<Tenant> {
  const env = { NATS_PREFIX: prefix, NATS_URL: url, ...extra };
  const created = await cli(
    [
      'tenant',
      'create',
      '--slug',
      slug,
      '--name',
      `${slug} OTT`,
      '--plan',
      plan,
      '--owner-email',
      `owner@${slug}.test`,
      '--owner-password',
      'correct horse battery',
    ],
    env,
  );
  if (created.code !== 0) throw new Error(`tenant create failed: ${created.stderr}`);
  const key = await cli(['apikey', 'create', '--tenant', slug, '--name', 'web', '--environment', 'production'], env);
  if (key.code !== 0 || !key.json) throw new Error(`apikey create failed: ${key.stderr}`);
  return { slug, key: String(key.json.key), keyId: String(key.json.id) };
}

export interface StoredMessage {
  subject: string;
  seq: number;
  events: WireEvent[];
}

/**
 * Every message of one of a namespace's streams (`events` or `raw`), decoded as its reader would see it: for the raw
 * stream, the events each aggregator output message passes on (read from the event stream, as the flusher does).
 */
export async function readEventStream(
  prefix: string,
  url = natsUrl,
  which: 'events' | 'raw' = 'events',
): Promise<StoredMessage[]> {
  const bus = await Bus.connect({ nats_url: url, nats_prefix: prefix }, createLogger('error'), 'test-reader');
  try {
    const stream = which === 'events' ? bus.names.eventsStream : bus.names.rawStream;
    const info = await bus.jsm.streams.info(stream);
    const out: StoredMessage[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await bus.jsm.streams.getMessage(stream, { seq });
      if (which === 'events') {
        out.push({ subject: m.subject, seq, events: decodeMessage(m.data).events });
        continue;
      }
      const output = decodeOutput(m.data);
      const events: WireEvent[] = [];
      forEachPassed(
        output,
        await readInputs(bus, [output], (s) => {
          throw new Error(`input ${s} is not in the event stream`);
        }),
        (e) => events.push(e),
      );
      out.push({ subject: m.subject, seq, events });
    }
    return out;
  } finally {
    await bus.close();
  }
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    checkAnswer('POST', url, res.status, res.headers, text);
    return { status: res.status, headers: res.headers, body: { raw: text } };
  }
  checkAnswer('POST', url, res.status, res.headers, parsed);
  return { status: res.status, headers: res.headers, body: parsed };
}

/** Poll until `check` holds or `ms` pass; returns the time it took, or -1. */
export async function eventually(check: () => Promise<boolean>, ms = 5000, every = 20): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < ms) {
    if (await check()) return Date.now() - start;
    await new Promise((r) => setTimeout(r, every));
  }
  return -1;
}

/** A TCP port nothing listens on right now. */
export { freePort } from '../../bench/host.js';

/**
 * True when the pipeline has caught up: every shard's aggregator has published a complete batch through the last
 * input of its shard, and (unless `flush` is false: no flush role runs) both flush tiers have nothing pending or
 * unacknowledged.
 */
/** `at`: a NATS URL, or connection options (a server that authenticates). */
export async function drained(
  prefix: string,
  shards = 4,
  at: string | ConnectionOptions = natsUrl,
  flush = true,
): Promise<boolean> {
  const nc = await connect(typeof at === 'string' ? { servers: at } : at);
  try {
    const jsm = await nc.jetstreamManager();
    const names = busNames(prefix);
    const last = async (stream: string, subject: string) =>
      jsm.streams.getMessage(stream, { last_by_subj: subject }).catch(() => null);
    for (let shard = 0; shard < shards; shard++) {
      const input = await last(names.eventsStream, names.eventsSubject(shard));
      if (!input) continue;
      const output = await last(names.rawStream, names.rawSubject(shard));
      if (!output) return false;
      const mark = outputMark(output.header);
      if (mark.upTo < input.seq || !mark.complete) return false;
    }
    if (!flush) return true;
    for (const name of [names.flushConsumer, names.flushBulkConsumer]) {
      const flusher = await jsm.consumers.info(names.rawStream, name).catch(() => null);
      if (flusher === null || flusher.num_pending + flusher.num_ack_pending !== 0) return false;
    }
    return true;
  } finally {
    await nc.close();
  }
}
