import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type NatsConnection } from 'nats';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, poll } from './host.js';

const natsServerBin = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

/** A private nats-server with JetStream (to kill and restart: tests and the soak); `start` resolves once JetStream answers. */
export class PrivateNats {
  private child: ChildProcess | undefined;
  private exited: Promise<unknown> = Promise.resolve();
  log = '';
  constructor(
    readonly port: number,
    readonly storeDir: string,
    /** More nats-server options (a cluster's name, listen address and routes). */
    private readonly extraArgs: readonly string[] = [],
    /** For a server that authenticates: who the readiness check signs in as, and nats-server's environment. */
    private readonly access: { user?: string; pass?: string; env?: Record<string, string> } = {},
  ) {}

  /** Started, with a `max_payload` of `bytes`, its store and config under `dir`. */
  static async withMaxPayload(dir: string, bytes: number): Promise<PrivateNats> {
    writeFileSync(join(dir, 'nats.conf'), `max_payload: ${bytes}\n`);
    const nats = new PrivateNats(await freePort(), join(dir, 'js'), ['-c', join(dir, 'nats.conf')]);
    await nats.start();
    return nats;
  }

  /**
   * Three servers as one JetStream cluster, each with its store under `dir`; resolves once the cluster places a
   * three-replica stream. Each server answering is not yet a cluster that places them (its meta leader is elected
   * after): on a busy machine a service's first stream creation timed out there.
   */
  static async cluster(dir: string): Promise<PrivateNats[]> {
    const servers = await PrivateNats.clusterServers(dir);
    try {
      for (const s of servers) s.launch();
      await Promise.all(servers.map((s) => s.ready()));
      const url = servers.map((s) => s.url).join(',');
      const placed = await poll(
        async () => {
          const nc = await connect({ servers: url, reconnect: false, timeout: 1000 }).catch(() => null);
          if (!nc) return false;
          try {
            const jsm = await nc.jetstreamManager({ timeout: 2000 });
            await jsm.streams.add({ name: 'cluster_probe', subjects: ['cluster.probe'], num_replicas: 3 });
            await jsm.streams.delete('cluster_probe');
            return true;
          } catch {
            return false;
          } finally {
            await nc.close().catch(() => undefined);
          }
        },
        60_000,
        250,
      );
      if (!placed)
        throw new Error('the three servers did not form a cluster that places replicated streams within 60 s');
      return servers;
    } catch (err) {
      await Promise.all(servers.map((s) => s.kill()));
      throw err;
    }
  }

  /** The three servers of a cluster, not started (`cluster` starts them). */
  static async clusterServers(dir: string): Promise<PrivateNats[]> {
    const ports = await Promise.all([0, 1, 2].map(() => freePort(true)));
    const routePorts = await Promise.all([0, 1, 2].map(() => freePort(true)));
    const routes = routePorts.map((p) => `nats://127.0.0.1:${p}`).join(',');
    return ports.map(
      (port, i) =>
        new PrivateNats(port, join(dir, `n${i}`), [
          '--server_name',
          `n${i}`,
          '--cluster_name',
          'darshak',
          '--cluster',
          `nats://127.0.0.1:${routePorts[i]}`,
          '--routes',
          routes,
        ]),
    );
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.launch();
    await this.ready();
  }

  /** Start the process without waiting: a cluster's servers answer JetStream only once a quorum of them runs. */
  launch(): void {
    const child = spawn(
      natsServerBin,
      ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.storeDir, ...this.extraArgs],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...this.access.env },
      },
    );
    this.child = child;
    this.exited = new Promise((r) => child.once('exit', r));
    const keep = (d: Buffer): void => {
      this.log = (this.log + d.toString()).slice(-20_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  /** Resolves once JetStream answers on this server. */
  async ready(): Promise<void> {
    const ready = await poll(
      async () => {
        let nc: NatsConnection | undefined;
        try {
          nc = await connect({
            servers: this.url,
            reconnect: false,
            timeout: 500,
            user: this.access.user,
            pass: this.access.pass,
          });
          await (await nc.jetstreamManager({ timeout: 1000 })).getAccountInfo();
          return true;
        } catch {
          return false;
        } finally {
          await nc?.close().catch(() => undefined);
        }
      },
      15_000,
      100,
    );
    if (!ready) throw new Error(`nats-server did not start on ${this.url}:\n${this.log}`);
  }

  /** Kill it without waiting (from an `exit` handler). */
  killNow(): void {
    this.child?.kill('SIGKILL');
  }

  /** Stop it: at once (SIGKILL, a crash) or as an operator does (SIGTERM: it closes its store first). */
  async kill(signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill(signal);
    await this.exited;
  }
}
