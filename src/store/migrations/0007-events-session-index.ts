import type { Migration } from '../migrate.js';

// An aggregator asks for a session's stored events when a late event comes for a session no longer in memory
// (src/store/events.ts `sessionHistory`), and `darshak replay` reads whole sessions: both find a session's rows in
// `events`, ordered by (tenant, ts), through this index on `session_id`. Materialized in the background for the
// parts a store already holds; until then those parts are read whole, which is slower, not wrong.
export const migration: Migration = {
  version: 7,
  name: 'events-session-index',
  statements: ['ALTER TABLE events ADD INDEX IF NOT EXISTS session_idx session_id TYPE bloom_filter(0.01) GRANULARITY 1', 'ALTER TABLE events MATERIALIZE INDEX session_idx'],
};
