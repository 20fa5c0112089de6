import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse } from 'yaml';
import {
  natsAuthConfig,
  natsRoles,
  newNatsPassword,
  passwordVariable,
  type NatsRole,
} from '../../src/bus/permissions.js';
import { loadConfig } from '../../src/config/load.js';
import { configKeys } from '../../src/config/schema.js';
import { registry } from '../../src/registry.js';
import { resolveTargets } from '../../src/modules.js';
import { root } from '../helpers/env.js';

// docker-compose.yml is the distributed layout users run. Compose itself checks it (`docker compose config`, or
// Debian's docker-compose 1.29, which .ci/run installs when neither is present); this test then reads the resolved
// file and checks what Compose cannot know: the roles and flags exist, every shard is aggregated exactly once, every
// role runs, and each Darshak service's environment is a configuration Darshak accepts.

function composeCli(): string[] | null {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  if (spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0) return ['docker-compose'];
  return null;
}

interface Service {
  image?: string;
  command?: string[];
  environment?: Record<string, string | null>;
  healthcheck?: { test: string[] };
  ports?: Array<string | { published: number | string; target: number | string }>;
  deploy?: { replicas?: number };
  volumes?: Array<string | { source: string; target: string }>;
}

const cli = composeCli();
// Outside CI a developer may have no Compose; CI always has one.
const skip =
  !cli && !process.env.CI
    ? 'docker compose (or docker-compose) is not installed: docker-compose.yml is checked in CI'
    : false;

t.test(
  'docker-compose.yml: valid for Compose, and every Darshak service a layout Darshak accepts',
  { skip },
  async (t) => {
    t.ok(cli, 'a Compose CLI (CI installs Debian docker-compose when none is present)');
    if (!cli) return;
    // The passwords a user's .env holds (`darshak nats-auth --passwords`).
    const passwords = Object.fromEntries(
      [...natsRoles, 'admin' as const].map((u) => [passwordVariable(u), newNatsPassword()]),
    );
    const run = spawnSync(cli[0]!, [...cli.slice(1), '-f', `${root}docker-compose.yml`, 'config'], {
      encoding: 'utf8',
      cwd: root,
      env: { ...process.env, ...passwords },
    });
    t.equal(run.status, 0, `${cli.join(' ')} config: ${run.stderr}`);
    const file = parse(run.stdout) as { services: Record<string, Service> };
    const darshak = Object.entries(file.services).filter(([, s]) => s.image === 'darshak:local');
    const roles = new Map<string, number>();
    const shards: number[] = [];
    for (const [name, s] of darshak) {
      const env = Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v ?? '')]));
      const unknown = Object.keys(env).filter((k) => !(k.toLowerCase() in configKeys));
      t.same(unknown, [], `${name}: every variable is a configuration key`);
      const config = loadConfig({ env });
      const command = s.command ?? [];
      t.equal(command[0], 'start', `${name}: darshak start`);
      const role = command[command.indexOf('--role') + 1] ?? 'all';
      t.equal(config.nats_user, role, `${name}: signs in to NATS as its role's user`);
      t.equal(
        config.nats_password,
        passwords[passwordVariable(role as NatsRole)],
        `${name}: with that user's password`,
      );
      for (const r of resolveTargets(registry, role)) roles.set(r, (roles.get(r) ?? 0) + (s.deploy?.replicas ?? 1));
      if (command.includes('--shards'))
        shards.push(...command[command.indexOf('--shards') + 1]!.split(',').map(Number));
      else if (role.split(',').includes('aggregate'))
        shards.push(...Array.from({ length: config.shards }, (_, i) => i));
      const listens = role.includes('ingest') ? config.ingest_port : role.includes('api') ? config.base_port : null;
      if (listens !== null) {
        t.ok(s.healthcheck, `${name}: a health check`);
        t.equal(config.host, '0.0.0.0', `${name}: listens beyond the container`);
        t.ok(
          (s.ports ?? []).some(
            (p) => String(typeof p === 'string' ? p.split(':').pop() : p.target) === String(listens),
          ),
          `${name}: publishes port ${listens}`,
        );
      }
      t.equal(config.stream_replicas, 3, `${name}: every stream on all three NATS servers`);
    }
    t.same([...roles.keys()].sort(), resolveTargets(registry, 'all').sort(), 'every role runs');
    t.ok(
      (roles.get('ingest') ?? 0) >= 2 && (roles.get('alerts') ?? 0) >= 2,
      'two ingest processes and a standby alerts process',
    );
    const { shards: count } = loadConfig({
      env: Object.fromEntries(Object.entries(darshak[0]![1].environment ?? {}).map(([k, v]) => [k, String(v)])),
    });
    t.same(
      shards.sort((a, b) => a - b),
      Array.from({ length: count }, (_, i) => i),
      'each shard aggregated by exactly one service',
    );
    const natsServers = Object.entries(file.services).filter(([n]) => /^nats-\d$/.test(n));
    t.equal(natsServers.length, 3, 'a three-server NATS cluster');
    for (const [name, s] of natsServers) {
      const command = s.command ?? [];
      t.equal(command[command.indexOf('-c') + 1], '/etc/nats/auth.conf', `${name}: runs the generated users`);
      t.ok(
        (s.volumes ?? []).some((v) =>
          (typeof v === 'string' ? v : `${v.source}:${v.target}`).includes('deploy/nats/auth.conf:/etc/nats/auth.conf'),
        ),
        `${name}: mounts them`,
      );
      t.same(
        Object.keys(s.environment ?? {}).sort(),
        Object.keys(passwords).sort(),
        `${name}: knows every user's password`,
      );
    }
  },
);

t.test('deploy/nats/auth.conf is what `darshak nats-auth` generates from src/bus/permissions.ts', async (t) => {
  t.equal(
    readFileSync(`${root}deploy/nats/auth.conf`, 'utf8'),
    natsAuthConfig('darshak'),
    'regenerate it: npx darshak nats-auth > deploy/nats/auth.conf',
  );
});
