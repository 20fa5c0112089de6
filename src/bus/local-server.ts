import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';

function answers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((done) => {
    const socket = tcpConnect({ host, port });
    const finish = (ok: boolean): void => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

export function findOnPath(binary: string, path = process.env.PATH ?? ''): string | null {
  for (const dir of [...path.split(delimiter), '/usr/sbin', '/usr/local/sbin']) {
    if (!dir) continue;
    const candidate = join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export interface LocalNats {
  stop(): Promise<void>;
}

/**
 * CONTRACT §1: when nothing answers at NATS_URL and nats-server is on PATH, run one with JetStream under
 * DATA_DIR/nats for the life of this process; otherwise say how to get one.
 */
export async function ensureLocalNats(config: Config, log: Logger): Promise<LocalNats | null> {
  const first = new URL((config.nats_url.split(',')[0] as string).trim().replace(/^tls:/, 'nats:'));
  const host = first.hostname || '127.0.0.1';
  const port = Number(first.port || 4222);
  if (await answers(host, port)) return null;
  const howTo = `Nothing answers at ${config.nats_url}. Start a NATS server with JetStream (e.g. \`nats-server -js\`, Debian package nats-server) or set NATS_URL.`;
  if (!config.nats_autostart) throw new Error(howTo);
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) throw new Error(howTo);
  const binary = findOnPath('nats-server');
  if (!binary) throw new Error(howTo);
  const storeDir = resolve(config.data_dir, 'nats');
  mkdirSync(storeDir, { recursive: true });
  const child: ChildProcess = spawn(binary, ['-js', '-a', host, '-p', String(port), '-sd', storeDir], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  log.info({ binary, port, store_dir: storeDir }, 'started a local nats-server');
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nats-server exited at start: ${stderr.trim()}`);
    if (await answers(host, port, 200)) {
      return {
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`nats-server did not answer on ${host}:${port} within 10 s`);
}
