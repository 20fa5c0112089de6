import { completionMinutes } from '../../../pipelines/content.js';
import type { Migration } from '../migrate.js';
import { createTableSql } from '../snapshots.js';

/**
 * Completion sums per minute of start (`completion_minutes`, later `content_minute_sums`: pipelines/content.ts) into
 * `table`, from `session_hours`: each session in the row of its first hour, under the minute it started. The bench
 * fills `content_minute_sums` the same way.
 */
export const completionFromSessions = (table: string): string => `INSERT INTO ${table} (tenant, ts, content_id, furthest_sec, sessions, completion_sum)
  SETTINGS insert_deduplicate = 0, insert_deduplication_token = ''
  SELECT tenant, toStartOfMinute(first_ts) AS m, content_id, if(known, -1, furthest_sec) AS f, toInt64(count()),
    sum(if(known, if(ended = 1, 100, least(100, furthest_sec / assumeNotNull(duration_sec) * 100)), 0))
  FROM (SELECT *, ended = 1 OR ifNull(duration_sec, 0) > 0 AS known FROM session_hours FINAL
        WHERE hour = toStartOfHour(first_ts) AND notEmpty(content_id))
  GROUP BY tenant, m, content_id, f`;

// Emptied first, so a run again after a crash writes it once. Sessions open across the upgrade are exact again after a
// `darshak replay` of their minutes (docs/store.md "Completion").
export const migration: Migration = {
  version: 5,
  name: 'completion-minutes',
  statements: [createTableSql(completionMinutes), 'TRUNCATE TABLE completion_minutes', completionFromSessions('completion_minutes')],
};
