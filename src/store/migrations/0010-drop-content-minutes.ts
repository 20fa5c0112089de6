import type { Migration } from '../migrate.js';

// The two tables migration 9 copied into `content_minute_sums`, no longer written or read.
export const migration: Migration = {
  version: 10,
  name: 'drop-content-minutes',
  statements: ['DROP TABLE IF EXISTS content_minutes', 'DROP TABLE IF EXISTS completion_minutes'],
};
