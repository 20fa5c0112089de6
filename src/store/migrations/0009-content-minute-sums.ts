import { completionMinutes, contentMinuteSums, contentMinutes } from '../../../pipelines/content.js';
import type { Migration } from '../migrate.js';
import { createTableSql } from '../snapshots.js';

// `content_minute_sums` (pipelines/content.ts) holds what `content_minutes` (watch time) and `completion_minutes`
// (completion) held, so top content reads one table's tiers instead of two; its past is copied here from both. Emptied
// first, so a run again after a crash writes it once; the old tables are created first where a new store has not got
// them yet (the snapshot tables come after the migrations), and dropped only by migration 10, once this one is recorded.
const copy = `INSERT INTO content_minute_sums (tenant, ts, content_id, furthest_sec, watch_ms, sessions, completion_sum)
  SETTINGS insert_deduplicate = 0, insert_deduplication_token = ''`;

export const migration: Migration = {
  version: 9,
  name: 'content-minute-sums',
  statements: [
    createTableSql(contentMinutes),
    createTableSql(completionMinutes),
    createTableSql(contentMinuteSums),
    'TRUNCATE TABLE content_minute_sums',
    `${copy} SELECT tenant, ts, content_id, -1, watch_ms, 0, 0 FROM content_minutes`,
    `${copy} SELECT tenant, ts, content_id, furthest_sec, 0, sessions, completion_sum FROM completion_minutes`,
  ],
};
