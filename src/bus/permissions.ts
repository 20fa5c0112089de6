import { randomBytes } from 'node:crypto';
import { busNames, type BusNames } from './names.js';

// What each role may do on NATS, as the server enforces it (docs/security.md): the one list of which role reads or
// writes which stream, bucket and subject. `natsAuthConfig` turns it into nats-server's `authorization` block; the
// deployment's NATS runs it (deploy/nats/auth.conf is generated from here and checked equal by a test).

/**
 * `open`: find or create it (every opener may be first); `read`: also read and consume it; `write`: also write to it;
 * `purge`: also remove messages (an object store's replaced chunks, a delivery log).
 */
type Access = 'open' | 'read' | 'write' | 'purge';

interface Resource {
  stream: string;
  subjects: string[];
  /** A stream Darshak configures itself (not a KV bucket or object store): each role that uses it brings it to its settings at start. */
  configured: boolean;
}

interface Grant {
  resources: Array<[Resource, Access]>;
  /** Core NATS subjects published (not stored). */
  publish: string[];
  subscribe: string[];
  /** Answers requests on the subjects it subscribes to. */
  responds?: boolean;
}

export const natsRoles = ['ingest', 'aggregate', 'flush', 'alerts', 'webhooks', 'api'] as const;
export type NatsRole = (typeof natsRoles)[number];

const kv = (bucket: string): Resource => ({ stream: `KV_${bucket}`, subjects: [`$KV.${bucket}.>`], configured: false });
const objects = (bucket: string): Resource => ({
  stream: `OBJ_${bucket}`,
  subjects: [`$O.${bucket}.>`],
  configured: false,
});
const stream = (name: string, ...subjects: string[]): Resource => ({ stream: name, subjects, configured: true });

function grants(n: BusNames): Record<NatsRole, Grant> {
  const events = stream(n.eventsStream, n.eventsWildcard);
  const raw = stream(n.rawStream, n.rawWildcard);
  const signals = stream(n.signalsStream, n.signalsWildcard);
  const alerts = stream(n.alertsStream, n.alertRowsWildcard);
  const webhookEvents = stream(n.webhookEventsStream, n.webhookEventsWildcard);
  const deliveries = stream(
    n.webhookDeliveriesStream,
    n.webhookDeliveryWildcard('new'),
    n.webhookDeliveryWildcard('retry'),
  );
  const held = stream(n.webhookHeldStream, n.webhookHeldWildcard);
  const deliveryLog = stream(n.webhookLogStream, n.webhookLogWildcard);
  // The bus module of every process: it checks the shard count and brings the three event streams to its settings.
  const bus: Array<[Resource, Access]> = [
    [kv(n.clusterBucket), 'write'],
    [events, 'open'],
    [raw, 'open'],
    [signals, 'open'],
  ];
  // The control plane as the ingest and alerts roles see it (ingest keys, tenants), and the usage counters.
  const directory: Array<[Resource, Access]> = [
    [kv(n.tenantsBucket), 'read'],
    [kv(n.apiKeysBucket), 'read'],
  ];
  const usage: Array<[Resource, Access]> = [
    [kv(n.usageBucket), 'write'],
    [kv(n.rateBucket), 'write'],
  ];
  const controlBuckets = [n.tenantsBucket, n.usersBucket, n.apiKeysBucket, n.serviceAccountsBucket, n.webhooksBucket];
  return {
    ingest: {
      resources: [...bus, ...directory, ...usage, [kv(n.keyUsageBucket), 'write'], [events, 'write']],
      publish: [],
      subscribe: [n.flushedSubject],
    },
    aggregate: {
      resources: [...bus, [events, 'read'], [raw, 'write'], [signals, 'write'], [objects(n.checkpointBucket), 'purge']],
      publish: [n.historySubject],
      subscribe: [],
    },
    flush: {
      resources: [...bus, [events, 'read'], [raw, 'read'], [alerts, 'read'], [kv(n.flushGroupsBucket), 'write']],
      publish: [n.flushedSubject],
      subscribe: [n.replaySubject, n.historySubject],
      responds: true,
    },
    alerts: {
      resources: [
        ...bus,
        ...directory,
        ...usage,
        [signals, 'write'],
        [alerts, 'write'],
        [objects(n.checkpointBucket), 'purge'],
        [kv(n.alertsLeaseBucket), 'write'],
        [kv(n.alertMarksBucket), 'write'],
        [webhookEvents, 'write'],
      ],
      publish: [n.alertsLiveSubject('*')],
      subscribe: [],
    },
    webhooks: {
      resources: [
        ...bus,
        ...controlBuckets.map((b): [Resource, Access] => [kv(b), 'open']),
        [kv(n.tenantsBucket), 'read'],
        [kv(n.webhooksBucket), 'write'],
        [webhookEvents, 'read'],
        [deliveries, 'write'],
        [held, 'purge'],
        [deliveryLog, 'write'],
        [kv(n.webhookAttemptsBucket), 'write'],
      ],
      publish: [],
      subscribe: [],
    },
    // The api role, and the CLI (`darshak tenant …`, `darshak replay`) run with its credentials.
    api: {
      resources: [
        ...bus,
        ...controlBuckets.map((b): [Resource, Access] => [kv(b), 'write']),
        [kv(n.jwksBucket), 'write'],
        [kv(n.revokedTokensBucket), 'write'],
        [kv(n.loginsBucket), 'write'],
        [kv(n.apiRateBucket), 'write'],
        [kv(n.exportsBucket), 'write'],
        [kv(n.exportSecretBucket), 'write'],
        [kv(n.keyUsageBucket), 'read'],
        [kv(n.usageBucket), 'read'],
        [webhookEvents, 'write'],
        [deliveries, 'write'],
        [held, 'open'],
        [deliveryLog, 'purge'],
      ],
      publish: [n.replaySubject],
      subscribe: [n.alertsLiveSubject('*')],
    },
  };
}

/** The reply subjects of a user's requests and consumers: its own, so that no role reads another's replies. */
export const inboxPrefix = (user: string): string => `_INBOX_${user}`;

const streamApi = ({ stream: s, configured }: Resource, access: Access): string[] => {
  const open = [
    `$JS.API.STREAM.INFO.${s}`,
    `$JS.API.STREAM.CREATE.${s}`,
    ...(configured ? [`$JS.API.STREAM.UPDATE.${s}`] : []),
  ];
  if (access === 'open') return open;
  const read = [
    ...open,
    `$JS.API.STREAM.MSG.GET.${s}`,
    `$JS.API.DIRECT.GET.${s}`,
    `$JS.API.DIRECT.GET.${s}.>`,
    `$JS.API.CONSUMER.CREATE.${s}`,
    `$JS.API.CONSUMER.CREATE.${s}.>`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${s}.>`,
    `$JS.API.CONSUMER.INFO.${s}.>`,
    `$JS.API.CONSUMER.DELETE.${s}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${s}.>`,
    `$JS.ACK.${s}.>`,
    `$JS.FC.${s}.>`,
  ];
  return access === 'purge' ? [...read, `$JS.API.STREAM.PURGE.${s}`] : read;
};

/** The subjects a role may publish to and subscribe to, for nats-server's `permissions`. */
export function rolePermissions(
  prefix: string,
  role: NatsRole,
): { publish: string[]; subscribe: string[]; responds: boolean } {
  const n = busNames(prefix);
  const g = grants(n)[role];
  const publish = new Set<string>(['$JS.API.INFO', ...g.publish]);
  const strongest = new Map<string, [Resource, Access]>();
  const rank: Record<Access, number> = { open: 0, read: 1, write: 2, purge: 3 };
  for (const [r, a] of g.resources) {
    const have = strongest.get(r.stream);
    if (!have || rank[a] > rank[have[1]]) strongest.set(r.stream, [r, a]);
  }
  for (const [r, a] of strongest.values()) {
    for (const s of streamApi(r, a)) publish.add(s);
    if (rank[a] >= rank.write) for (const s of r.subjects) publish.add(s);
  }
  return {
    publish: [...publish],
    subscribe: [`${inboxPrefix(role)}.>`, ...g.subscribe],
    responds: g.responds === true,
  };
}

const quoted = (s: string): string => JSON.stringify(s);

/**
 * nats-server's `authorization` block: a user per role with only what it needs, and `admin` with everything (for
 * operators and for processes that run several roles). Passwords are read from the environment of nats-server:
 * `DARSHAK_<ROLE>_PASSWORD`.
 */
export function natsAuthConfig(prefix: string): string {
  const users = natsRoles.map((role) => {
    const p = rolePermissions(prefix, role);
    const list = (xs: string[]): string => `[\n${xs.map((x) => `          ${quoted(x)}`).join(',\n')}\n        ]`;
    return [
      `    {`,
      `      user: ${role}`,
      `      password: $${passwordVariable(role)}`,
      `      permissions: {`,
      `        publish: ${list(p.publish)}`,
      `        subscribe: ${list(p.subscribe)}`,
      ...(p.responds ? [`        allow_responses: true`] : []),
      `      }`,
      `    }`,
    ].join('\n');
  });
  users.push([`    {`, `      user: admin`, `      password: $${passwordVariable('admin')}`, `    }`].join('\n'));
  return [
    `# Generated by \`darshak nats-auth --prefix ${prefix}\` from src/bus/permissions.ts: do not edit.`,
    `# One NATS user per Darshak role, allowed only the streams, buckets and subjects that role uses (docs/security.md).`,
    `authorization {`,
    `  users: [`,
    users.join(',\n'),
    `  ]`,
    `}`,
    '',
  ].join('\n');
}

/**
 * A password for the generated users: nats-server parses an environment variable's value as a config value, so it
 * must read as a string (a letter first, then letters and digits); 192 random bits.
 */
export const newNatsPassword = (): string => `p${randomBytes(24).toString('hex')}`;

export const passwordVariable = (user: NatsRole | 'admin'): string => `DARSHAK_${user.toUpperCase()}_PASSWORD`;
