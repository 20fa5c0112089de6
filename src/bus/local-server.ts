import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import type { Config } from '../config/schema.js';
import { BusUnavailableError } from './bus.js';
import type { Logger } from '../log.js';
import { createPrivateFile } from '../private-file.js';

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

const loopback = ['127.0.0.1', 'localhost', '::1', '[::1]'];

function firstServer(natsUrl: string): { host: string; port: number } {
  const first = new URL((natsUrl.split(',')[0] as string).trim().replace(/^tls:/, 'nats:'));
  return { host: first.hostname || '127.0.0.1', port: Number(first.port || 4222) };
}

export const isLoopbackUrl = (natsUrl: string): boolean => loopback.includes(firstServer(natsUrl).host);

interface LocalCredentials {
  user: string;
  password: string;
}

const credentialsFile = (dataDir: string): string => resolve(dataDir, 'nats', 'credentials.json');

/** The user of the local server that `darshak start` runs under `dataDir`, if it ever ran one. */
export function readLocalCredentials(dataDir: string): LocalCredentials | null {
  const file = credentialsFile(dataDir);
  if (!existsSync(file)) return null;
  const value = JSON.parse(readFileSync(file, 'utf8')) as Partial<LocalCredentials>;
  if (typeof value.user !== 'string' || typeof value.password !== 'string')
    throw new BusUnavailableError(`${file} holds no NATS user and password`);
  return { user: value.user, password: value.password };
}

/** The local server's user: the configured one, else one generated on its first start and kept (0600) beside its store. */
function localCredentials(config: Config): LocalCredentials {
  if (config.nats_user !== '') return { user: config.nats_user, password: config.nats_password };
  const kept = readLocalCredentials(config.data_dir);
  if (kept) return kept;
  const made = { user: 'darshak', password: randomBytes(24).toString('base64url') };
  createPrivateFile(credentialsFile(config.data_dir), JSON.stringify(made));
  return made;
}

export interface LocalNats {
  stop(): Promise<void>;
}

/**
 * CONTRACT §1: when nothing answers at NATS_URL and nats-server is on PATH, run one with JetStream under
 * DATA_DIR/nats for the life of this process; otherwise say how to get one.
 */
export async function ensureLocalNats(config: Config, log: Logger): Promise<LocalNats | null> {
  const { host, port } = firstServer(config.nats_url);
  if (await answers(host, port)) return null;
  const howTo = `Nothing answers at ${config.nats_url}. Start a NATS server with JetStream (e.g. \`nats-server -js\`, Debian package nats-server) or set NATS_URL.`;
  if (!config.nats_autostart) throw new BusUnavailableError(howTo);
  if (!loopback.includes(host)) throw new BusUnavailableError(howTo);
  if (config.nats_creds_file !== '' || config.nats_nkey_file !== '' || /^tls:/.test(config.nats_url)) {
    throw new BusUnavailableError(
      `${howTo} (A local server is started only for a user, a token or no credentials, without TLS.)`,
    );
  }
  const binary = findOnPath('nats-server');
  if (!binary) throw new BusUnavailableError(howTo);
  const storeDir = resolve(config.data_dir, 'nats');
  mkdirSync(storeDir, { recursive: true, mode: 0o700 });
  // Never without authentication: anyone who can write to NATS could otherwise mint tokens (docs/security.md).
  const confFile = join(storeDir, 'nats.conf');
  const auth = config.nats_token !== '' ? { token: config.nats_token } : localCredentials(config);
  writeFileSync(confFile, `authorization ${JSON.stringify(auth)}\n`, { mode: 0o600 });
  chmodSync(confFile, 0o600);
  const child: ChildProcess = spawn(binary, ['-c', confFile, '-js', '-a', host, '-p', String(port), '-sd', storeDir], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  log.info({ binary, port, store_dir: storeDir }, 'started a local nats-server');
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new BusUnavailableError(`nats-server exited at start: ${stderr.trim()}`);
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
  throw new BusUnavailableError(`nats-server did not answer on ${host}:${port} within 10 s`);
}
