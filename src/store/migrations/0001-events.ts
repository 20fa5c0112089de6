import type { Migration } from '../migrate.js';

// Every accepted, de-duplicated event with its enrichment. Ordered for per-tenant time scans; partitioned by month so
// retention drops whole parts. The TTL is set from config at every start (store.ts), not here.
// `non_replicated_deduplication_window` makes `insert_deduplication_token` work on a plain MergeTree: a batch sent
// again after a crash is not stored twice.
export const migration: Migration = {
  version: 1,
  name: 'events',
  statements: [
    `CREATE TABLE IF NOT EXISTS events (
      tenant LowCardinality(String),
      env LowCardinality(String),
      event_type LowCardinality(String),
      ts DateTime64(3, 'UTC'),
      client_ts Nullable(DateTime64(3, 'UTC')),
      received_at DateTime64(3, 'UTC'),
      event_id String,
      anonymous_id String,
      user_id String,
      session_id String,
      content_id String,
      content_type LowCardinality(String),
      content_title String,
      position_sec Nullable(UInt32),
      bitrate_kbps Nullable(UInt32),
      country LowCardinality(String),
      region LowCardinality(String),
      device LowCardinality(String),
      app_version LowCardinality(String),
      os LowCardinality(String),
      browser LowCardinality(String),
      player LowCardinality(String),
      cdn LowCardinality(String),
      pop LowCardinality(String),
      user_agent String,
      properties String,
      ingest_seq UInt64,
      ingest_index UInt32
    )
    ENGINE = MergeTree
    PARTITION BY toYYYYMM(ts)
    ORDER BY (tenant, ts, event_type)
    SETTINGS non_replicated_deduplication_window = 100000`,
  ],
};
