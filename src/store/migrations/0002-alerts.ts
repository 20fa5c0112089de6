import type { Migration } from '../migrate.js';

// Alerts, one row per version (the alerts role writes a new version when an incident resolves), and users'
// acknowledgements in a table of their own (the first one counts): an acknowledgement and a resolution made at once
// never overwrite each other.
export const migration: Migration = {
  version: 2,
  name: 'alerts',
  statements: [
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
