// The one description of every setting: type, bounds, meaning. Defaults live in config/default.json;
// docs/configuration.md is checked against this file by test/unit/config.test.ts.
export interface Config {
  data_dir: string;
  host: string;
  base_port: number;
  ingest_port: number;
  public_base_url: string;
  nats_url: string;
  nats_prefix: string;
  nats_autostart: boolean;
  box_processes: 'roles' | 'one';
  nats_user: string;
  nats_password: string;
  nats_token: string;
  nats_creds_file: string;
  nats_nkey_file: string;
  nats_tls_ca_file: string;
  nats_tls_cert_file: string;
  nats_tls_key_file: string;
  clickhouse_url: string;
  smtp_url: string;
  webhook_allow_hosts: string[];
  trust_proxy: boolean;
  log_level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  http_engine: 'auto' | 'uws' | 'node';
  shards: number;
  stream_max_age_hours: number;
  stream_replicas: number;
  publish_timeout_ms: number;
  publish_max_inflight: number;
  publish_max_message_bytes: number;
  usage_sync_ms: number;
  ingest_shed_lag_ms: number;
  ingest_shed_max_lag_ms: number;
  events_retention_days: number;
  aggregate_shards: string[];
  checkpoint_interval_ms: number;
  flush_interval_ms: number;
  flush_bulk_interval_ms: number;
  aggregate_flush_interval_ms: number;
  aggregate_session_retain_ms: number;
  session_snapshot_interval_ms: number;
  jwt_key_file: string;
  jwks_secret: string;
  alerts_max_per_hour: number;
  alerts_max_keys: number;
  analytics_rate_per_minute: number;
  export_s3_url: string;
  ops_token: string;
}

interface KeySpec {
  type: 'string' | 'integer' | 'boolean' | 'array';
  description: string;
  minimum?: number;
  maximum?: number;
  enum?: readonly string[];
  pattern?: string;
}

export const configKeys: Record<keyof Config, KeySpec> = {
  data_dir: { type: 'string', description: 'embedded ClickHouse, local NATS, keys, outbox, exports' },
  host: { type: 'string', description: 'address both listeners bind' },
  base_port: { type: 'integer', minimum: 0, maximum: 65535, description: '`{base_url}` listener (api role)' },
  ingest_port: { type: 'integer', minimum: 0, maximum: 65535, description: '`{ingest_url}` listener (ingest role)' },
  public_base_url: {
    type: 'string',
    pattern: '^https?://',
    description: 'external address of `{base_url}`, used in links',
  },
  nats_url: { type: 'string', pattern: '^(nats|tls)://', description: 'NATS server(s), comma-separated' },
  nats_prefix: {
    type: 'string',
    pattern: '^[a-z][a-z0-9_]{0,31}$',
    description: 'namespace of every stream, subject and KV bucket (lets several deployments or tests share one NATS)',
  },
  nats_autostart: {
    type: 'boolean',
    description:
      '`darshak start` with every role: when nothing answers at `nats_url` and `nats-server` is on PATH, run one under `DATA_DIR/nats` (a subset of roles never does)',
  },
  nats_user: {
    type: 'string',
    description:
      'NATS user name (with `nats_password`); the local server of `nats_autostart` gets a generated one when empty',
  },
  nats_password: { type: 'string', description: 'NATS password of `nats_user`' },
  nats_token: { type: 'string', description: 'NATS authentication token (instead of a user)' },
  nats_creds_file: {
    type: 'string',
    description: 'NATS `.creds` file: a user JWT and its NKey seed (instead of a user)',
  },
  nats_nkey_file: {
    type: 'string',
    description: 'file holding an NKey seed (`SU…`) to sign in with (instead of a user)',
  },
  nats_tls_ca_file: {
    type: 'string',
    description:
      "PEM CA bundle that NATS servers' certificates must chain to; setting any `nats_tls_*` (or a `tls://` URL) requires TLS",
  },
  nats_tls_cert_file: {
    type: 'string',
    description: 'PEM client certificate for NATS servers that verify clients (with `nats_tls_key_file`)',
  },
  nats_tls_key_file: { type: 'string', description: 'PEM private key of `nats_tls_cert_file`' },
  clickhouse_url: {
    type: 'string',
    description: 'ClickHouse server; empty means embedded chDB under `DATA_DIR/clickhouse`',
  },
  smtp_url: { type: 'string', description: 'SMTP transport; empty writes `.eml` files to `DATA_DIR/outbox/`' },
  webhook_allow_hosts: {
    type: 'array',
    description: 'CIDRs or host names exempt from the SSRF guard (env: comma-separated)',
  },
  trust_proxy: { type: 'boolean', description: 'take the client IP from `X-Forwarded-For`' },
  log_level: {
    type: 'string',
    enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    description: 'pino log level',
  },
  box_processes: {
    type: 'string',
    enum: ['roles', 'one'],
    description:
      '`darshak start` with every role: `roles` runs ingest, the aggregators, and the roles that use the store (flush, api, alerts, webhooks) as three child processes, so they use separate cores; `one` runs every role in this process',
  },
  http_engine: {
    type: 'string',
    enum: ['auto', 'uws', 'node'],
    description: '`auto`: uWebSockets.js where its pinned binary loads, else `node:http`',
  },
  shards: {
    type: 'integer',
    minimum: 1,
    maximum: 1024,
    description: 'event stream partitions; fixed for the life of the stream',
  },
  stream_max_age_hours: {
    type: 'integer',
    minimum: 1,
    maximum: 8760,
    description: 'how long JetStream keeps raw event messages',
  },
  stream_replicas: {
    type: 'integer',
    minimum: 1,
    maximum: 5,
    description: 'copies JetStream keeps of every stream, KV bucket and object store: 1 on one server, 3 on a cluster',
  },
  publish_timeout_ms: {
    type: 'integer',
    minimum: 100,
    maximum: 60000,
    description: 'how long an ingest request waits for JetStream acknowledgements before answering 503',
  },
  publish_max_inflight: {
    type: 'integer',
    minimum: 1,
    maximum: 4096,
    description: 'unacknowledged JetStream publishes per ingest process; past it, events wait and coalesce',
  },
  publish_max_message_bytes: {
    type: 'integer',
    minimum: 4096,
    maximum: 524288,
    description:
      "largest JetStream message ingest writes (an aggregator's output of it must still fit the server's 1 MiB `max_payload`)",
  },
  usage_sync_ms: {
    type: 'integer',
    minimum: 50,
    maximum: 10000,
    description: 'how often ingest processes share their rate and quota counts through NATS KV',
  },
  ingest_shed_lag_ms: {
    type: 'integer',
    minimum: 0,
    maximum: 600000,
    description:
      'pipeline lag (acknowledged to stored) past which ingest admits only what the pipeline drains, shedding the rest with 503 `ingest_overloaded`; 0 never sheds',
  },
  ingest_shed_max_lag_ms: {
    type: 'integer',
    minimum: 1000,
    maximum: 3600000,
    description:
      'pipeline lag at which ingest admits nothing more (it admits less and less from `ingest_shed_lag_ms` to here)',
  },
  events_retention_days: {
    type: 'integer',
    minimum: 1,
    maximum: 3650,
    description: 'how long ClickHouse keeps raw events (TTL of the `events` table, applied at start)',
  },
  aggregate_shards: {
    type: 'array',
    description: 'shards this process aggregates (env: comma-separated; `darshak start --shards 0,1`); empty means all',
  },
  checkpoint_interval_ms: {
    type: 'integer',
    minimum: 1000,
    maximum: 3600000,
    description:
      'how often an aggregator checkpoints its state to the NATS object store (a restart replays input only from there)',
  },
  aggregate_flush_interval_ms: {
    type: 'integer',
    minimum: 50,
    maximum: 1000,
    description:
      'how often an aggregator seals its output (raw events and snapshot rows); snapshots reach ClickHouse within about twice this',
  },
  aggregate_session_retain_ms: {
    type: 'integer',
    minimum: 600000,
    maximum: 86400000,
    description:
      "how long a session idle (by arrival) stays in an aggregator's memory; its later events first recall its earlier ones from the store (docs/aggregation.md)",
  },
  session_snapshot_interval_ms: {
    type: 'integer',
    minimum: 0,
    maximum: 600000,
    description:
      "how long (by arrival) a session's progress (its last event's time, event count, furthest position) may wait before its `session_hours` row is rewritten; its start, end and attributes are written at the next seal, and everything when the shard is idle; 0 rewrites it at every seal (docs/store.md)",
  },
  flush_interval_ms: {
    type: 'integer',
    minimum: 0,
    maximum: 60000,
    description:
      'the flush role starts a write of the events and the live tables (concurrency) to ClickHouse at most this often (unless a full group waits): fewer, larger inserts leave the store fewer parts to merge (docs/aggregation.md "Flush")',
  },
  flush_bulk_interval_ms: {
    type: 'integer',
    minimum: 0,
    maximum: 60000,
    description:
      'the same for every other pipeline table (per-minute sums, sessions, content, viewers): how far behind the events their answers may be',
  },
  jwt_key_file: {
    type: 'string',
    description:
      'PEM (PKCS#8) Ed25519 private key that signs tokens; empty means `DATA_DIR/keys/signing-key.pem`, generated on first start',
  },
  jwks_secret: {
    type: 'string',
    description:
      "HMAC key that signs each api process's public key in the `<prefix>_jwks` bucket (api processes trust only keys it signed); empty means `DATA_DIR/keys/jwks-secret`, generated on first start. Api processes with separate data directories need the same value",
  },
  alerts_max_per_hour: {
    type: 'integer',
    minimum: 1,
    maximum: 100000,
    description:
      'alerts of one category raised per tenant per UTC hour; past it one summary alert stands for the rest (docs/alerts.md)',
  },
  alerts_max_keys: {
    type: 'integer',
    minimum: 1,
    maximum: 1000000,
    description: 'regions, pops or titles one alert category follows per tenant; later ones are summed under `other`',
  },
  analytics_rate_per_minute: {
    type: 'integer',
    minimum: 1,
    maximum: 1000000,
    description: 'requests per minute per token at the api listener before 429 `rate_limited`',
  },
  export_s3_url: {
    type: 'string',
    pattern: '^(https?://.+)?$',
    description:
      'S3-compatible store for exports, `https://KEY:SECRET@host/bucket[/prefix][?region=R]`; empty keeps files under `DATA_DIR/exports`',
  },
  ops_token: {
    type: 'string',
    description:
      'when set, `/readyz` and `/metrics` of both listeners answer only `Authorization: Bearer <ops_token>` (else 401); `/healthz` stays open for liveness probes',
  },
};

export const configSchema = {
  type: 'object',
  additionalProperties: false,
  required: Object.keys(configKeys),
  properties: Object.fromEntries(
    Object.entries(configKeys).map(([key, spec]) => {
      const { description: _description, ...rest } = spec;
      const schema: Record<string, unknown> = { ...rest };
      if (spec.type === 'array') schema.items = { type: 'string', minLength: 1 };
      return [key, schema];
    }),
  ),
} as const;
