import type { Migration } from '../migrate.js';

// The tables no pipeline makes: every accepted event, and alerts. Frozen text: a migration says what the store was
// at its step, whatever the code says later (the pipelines' own tables are made from their specs at every open, by
// `ensureSnapshotTables`; docs/compatibility.md says what changes after 1.0).
//
// `events`: ordered for per-tenant time scans and partitioned by month, so retention drops whole parts (its TTL is set
// from config at every open, store.ts). `non_replicated_deduplication_window` makes `insert_deduplication_token` work
// on a plain MergeTree: a batch sent again after a crash is not stored twice. The `session_id` skip index finds a
// session's rows for a late event (src/store/events.ts `sessionHistory`) and for `darshak replay`.
//
// `alerts`: one row per version (the alerts role writes a new one when an incident resolves); acknowledgements in a
// table of their own (the first one counts), so an acknowledgement and a resolution made at once never overwrite
// each other.
export const migration: Migration = {
  version: 1,
  name: 'initial',
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
      ingest_index UInt32,
      INDEX session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 1
    )
    ENGINE = MergeTree
    PARTITION BY toYYYYMM(ts)
    ORDER BY (tenant, ts, event_type)
    SETTINGS non_replicated_deduplication_window = 100000`,
    `CREATE TABLE IF NOT EXISTS alerts (
      tenant LowCardinality(String),
      id UInt64,
      category LowCardinality(String),
      severity LowCardinality(String),
      source LowCardinality(String),
      title String,
      description String,
      data String,
      created_at DateTime64(3, 'UTC'),
      resolved_at Nullable(DateTime64(3, 'UTC')),
      version UInt64
    )
    ENGINE = ReplacingMergeTree(version)
    ORDER BY (tenant, id)
    SETTINGS non_replicated_deduplication_window = 100000`,
    `CREATE TABLE IF NOT EXISTS alert_acks (
      tenant LowCardinality(String),
      id UInt64,
      acknowledged_at DateTime64(3, 'UTC')
    )
    ENGINE = MergeTree
    ORDER BY (tenant, id)`,
  ],
};
