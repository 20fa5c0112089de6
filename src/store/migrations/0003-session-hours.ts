import { sessionHours } from '../../../pipelines/audience.js';
import type { Migration } from '../migrate.js';
import { createTableSql } from '../snapshots.js';

// `sessions` (one row per session, ordered by session id) gave way to `session_hours` (a row per session and hour,
// ordered by hour), which a query reads only for the hours of its range (docs/store.md "Reading sessions"). The rows
// already stored move over, then the old table goes. `sessions` is created first, empty, where it never existed, so
// every statement can run on any store; run again after a crash, the copy writes the same rows at the same versions,
// which replacing collapses.
export const migration: Migration = {
  version: 3,
  name: 'session-hours',
  statements: [
    createTableSql(sessionHours),
    `CREATE TABLE IF NOT EXISTS sessions (tenant LowCardinality(String), session_id String, first_ts DateTime64(3, 'UTC'),
      last_ts DateTime64(3, 'UTC'), viewer String, content_id String, region LowCardinality(String), country LowCardinality(String),
      pop LowCardinality(String), device LowCardinality(String), events UInt64, furthest_sec Float64, duration_sec Nullable(Float64),
      ended UInt8, version UInt64) ENGINE = ReplacingMergeTree(version) ORDER BY (tenant, session_id)`,
    `INSERT INTO session_hours (tenant, hour, session_id, first_ts, last_ts, viewer, content_id, region, country, pop, device, events, furthest_sec, duration_sec, ended, version)
      SETTINGS insert_deduplication_token = ''
      SELECT tenant, toDateTime(arrayJoin(range(toUInt32(toStartOfHour(first_ts)), toUInt32(last_ts) + 1, 3600)), 'UTC'), session_id, first_ts, last_ts,
        viewer, content_id, region, country, pop, device, events, furthest_sec, duration_sec, ended, version
      FROM sessions FINAL`,
    'DROP TABLE IF EXISTS sessions',
  ],
};
