// The distributed layout the soak runs and breaks: a private nats-server (or a cluster of three, streams replicated
// on all three), two ingest processes, two aggregators
// (shards 0,1 and 2,3), flush with the API (the embedded store is one process's: docs/deployment.md), alerts and
// webhooks, each `darshak start --role …` of the built service. It restarts what the fault schedule stops, and
// records any process that exits on its own (a crash is a finding, then restarted as a supervisor would).

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { freePort, mainJs, poll, sleep } from '../host.js';
import { PrivateNats } from '../private-nats.js';

export interface RoleSpec {
  name: string;
  args: string[];
  env: Record<string, string>;
  /** Its HTTP listener, whose /readyz says it is up. */
  url?: string;
}

interface Running {
  spec: RoleSpec;
  child: ChildProcess;
  /** Set before the soak stops it, so its exit is not taken for a crash. */
  stopping: boolean;
  log: string;
}

const keptLog = 20_000;
/** How long aggregators keep an idle session: the least allowed, so that late events recall sessions from the store. */
export const sessionRetainMs = 600_000;
const graceMs = 30_000;

export class Layout {
  private readonly running = new Map<string, Running>();
  /** Each role's log over all its processes (the tail), kept after they exit. */
  private readonly logs = new Map<string, string>();
  /** Exits nobody asked for: the role, its exit and the tail of its log. */
  readonly crashes: string[] = [];
  /** Roles that did not stop within the grace period after SIGTERM. */
  readonly slowStops: string[] = [];
  private closed = false;
  /** Each role's whole log, in `<dir>/logs/<role>.log` (kept with `--keep`). */
  private readonly files = new Map<string, WriteStream>();

  private constructor(
    /** One server, or a cluster of three. */
    readonly nats: readonly PrivateNats[],
    readonly prefix: string,
    readonly roles: readonly RoleSpec[],
    private readonly env: Record<string, string>,
    private readonly say: (line: string) => void,
    private readonly logDir: string,
  ) {
    mkdirSync(logDir, { recursive: true });
  }

  /** Every role started and ready. */
  static async start(dir: string, prefix: string, say: (line: string) => void, cluster = false): Promise<Layout> {
    let nats: PrivateNats[];
    if (cluster) nats = await PrivateNats.cluster(join(dir, 'nats'));
    else {
      nats = [new PrivateNats(await freePort(true), join(dir, 'nats'))];
      await nats[0]!.start();
    }
    const natsUrl = nats.map((s) => s.url).join(',');
    const [ingestA, ingestB, api] = [await freePort(true), await freePort(true), await freePort(true)];
    const url = (port: number): string => `http://127.0.0.1:${port}`;
    const retain = { AGGREGATE_SESSION_RETAIN_MS: String(sessionRetainMs) };
    const roles: RoleSpec[] = [
      {
        name: 'ingest-1',
        args: ['--role', 'ingest'],
        env: { INGEST_PORT: String(ingestA), DATA_DIR: join(dir, 'ingest-1') },
        url: url(ingestA),
      },
      {
        name: 'ingest-2',
        args: ['--role', 'ingest'],
        env: { INGEST_PORT: String(ingestB), DATA_DIR: join(dir, 'ingest-2') },
        url: url(ingestB),
      },
      { name: 'aggregate-a', args: ['--role', 'aggregate', '--shards', '0,1'], env: retain },
      { name: 'aggregate-b', args: ['--role', 'aggregate', '--shards', '2,3'], env: retain },
      {
        name: 'flush-api',
        args: ['--role', 'flush,api'],
        env: { BASE_PORT: String(api), DATA_DIR: join(dir, 'store') },
        url: url(api),
      },
      { name: 'alerts', args: ['--role', 'alerts'], env: {} },
      { name: 'webhooks', args: ['--role', 'webhooks'], env: { DATA_DIR: join(dir, 'webhooks') } },
    ];
    const env = {
      NATS_URL: natsUrl,
      NATS_PREFIX: prefix,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      STREAM_REPLICAS: String(nats.length),
    };
    const layout = new Layout(nats, prefix, roles, env, say, join(dir, 'logs'));
    // A soak stopped by a signal or an error must not leave its processes behind, reconnecting for ever.
    process.once('exit', layout.killAll);
    try {
      for (const r of roles) layout.launch(r);
      await layout.ready();
    } catch (err) {
      await layout.close();
      throw err;
    }
    return layout;
  }

  /** The environment the CLI needs to reach this layout's NATS namespace. */
  get cliEnv(): NodeJS.ProcessEnv {
    return { ...process.env, ...this.env };
  }

  /** Every NATS server's address, as a client lists them. */
  get natsUrl(): string {
    return this.nats.map((s) => s.url).join(',');
  }

  get ingestUrls(): string[] {
    return this.roles.filter((r) => r.name.startsWith('ingest')).map((r) => r.url!);
  }

  get apiUrl(): string {
    return this.roles.find((r) => r.name === 'flush-api')!.url!;
  }

  isUp(name: string): boolean {
    return this.running.has(name);
  }

  private launch(spec: RoleSpec): void {
    const child = spawn(process.execPath, [mainJs, 'start', ...spec.args], {
      env: { ...process.env, ...this.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const entry: Running = { spec, child, stopping: false, log: '' };
    let file = this.files.get(spec.name);
    if (!file)
      this.files.set(spec.name, (file = createWriteStream(join(this.logDir, `${spec.name}.log`), { flags: 'a' })));
    file.write(`--- started at ${new Date().toISOString()}\n`);
    const keep = (d: Buffer): void => {
      file.write(d);
      entry.log = (entry.log + d.toString()).slice(-keptLog);
      this.logs.set(spec.name, ((this.logs.get(spec.name) ?? '') + d.toString()).slice(-10 * keptLog));
    };
    this.logs.set(spec.name, `${this.logs.get(spec.name) ?? ''}--- started at ${new Date().toISOString()}\n`);
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    this.running.set(spec.name, entry);
    child.once('exit', (code, signal) => {
      if (this.running.get(spec.name) === entry) this.running.delete(spec.name);
      if (entry.stopping || this.closed) return;
      const line = `${spec.name} exited on its own (${signal ?? `code ${code}`})`;
      // A role that cannot reach NATS as it starts says so and exits; its supervisor starts it again (docker-compose's
      // `restart: unless-stopped`). Any other exit is a crash.
      if (/cannot reach NATS|Nothing answers at/.test(entry.log.slice(-2000)))
        this.say(`${line}: NATS unreachable at its start; restarted`);
      else {
        this.crashes.push(`${line}; its log's tail:\n${entry.log.slice(-4000)}`);
        this.say(
          `!! ${line}: restarted; its last words: ${entry.log.trim().split('\n').slice(-2).join(' | ').slice(0, 600)}`,
        );
      }
      setTimeout(() => {
        if (!this.closed && !this.running.has(spec.name)) this.launch(spec);
      }, 1000);
    });
  }

  /**
   * Stop one role (SIGKILL: a crash; SIGTERM: a drain) and wait for its exit. A drain gets what a supervisor gives
   * (Kubernetes' default grace period); one that takes longer is a finding, and the role is killed as it would be.
   */
  async stop(name: string, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    const entry = this.running.get(name);
    if (!entry) return;
    entry.stopping = true;
    const exited = new Promise<boolean>((r) => entry.child.once('exit', () => r(true)));
    entry.child.kill(signal);
    if (signal === 'SIGKILL' || (await Promise.race([exited, sleep(graceMs).then(() => false)])))
      return void (await exited);
    this.slowStops.push(
      `${name} still running ${graceMs / 1000} s after SIGTERM; its log's tail:\n${entry.log.slice(-4000)}`,
    );
    this.say(`!! ${name} did not stop within ${graceMs / 1000} s of SIGTERM: killed`);
    entry.child.kill('SIGKILL');
    await exited;
  }

  /** Start a stopped role again. */
  restart(name: string): void {
    const spec = this.roles.find((r) => r.name === name);
    if (!spec) throw new Error(`no role ${name}`);
    if (!this.running.has(name)) this.launch(spec);
  }

  /** Resolves once every role runs and each listener answers /readyz (throws after `ms`). */
  async ready(ms = 120_000): Promise<void> {
    const deadline = Date.now() + ms;
    for (const spec of this.roles) {
      const up = async (): Promise<boolean> =>
        this.running.has(spec.name) &&
        (!spec.url ||
          (await fetch(`${spec.url}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(() => null))?.ok === true);
      if (!(await poll(up, deadline - Date.now(), 200)))
        throw new Error(`${spec.name} not ready after ${ms} ms; its log's tail:\n${this.log(spec.name).slice(-4000)}`);
    }
  }

  /** Start a NATS server again after a fault stopped it; a start that fails is a finding, and is tried again a few times. */
  async startNats(server: number): Promise<void> {
    const nats = this.nats[server]!;
    for (let attempt = 1; ; attempt++) {
      try {
        return await nats.start();
      } catch (err) {
        const message = (err as Error).message;
        this.crashes.push(`nats-server did not start again: ${message.slice(-2000)}`);
        this.say(
          `!! nats-server did not start again (${message.trim().split('\n').slice(-1)[0]})${attempt < 5 ? ': trying again' : ''}`,
        );
        await nats.kill();
        if (attempt === 5) throw new Error(`nats-server did not start again after ${attempt} tries`);
      }
    }
  }

  /** The tail of one role's log. */
  log(name: string): string {
    return this.logs.get(name) ?? '';
  }

  /** Kill every process at once, synchronously (from an `exit` handler). */
  readonly killAll = (): void => {
    this.closed = true;
    for (const { child } of this.running.values()) child.kill('SIGKILL');
    for (const s of this.nats) s.killNow();
  };

  async close(): Promise<void> {
    this.closed = true;
    process.off('exit', this.killAll);
    await Promise.all([...this.running.keys()].map((name) => this.stop(name, 'SIGKILL')));
    await Promise.all(this.nats.map((s) => s.kill()));
    await Promise.all([...this.files.values()].map((f) => new Promise((r) => f.end(r))));
  }
}
