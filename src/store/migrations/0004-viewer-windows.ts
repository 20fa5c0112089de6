import { viewerWindows } from '../../../pipelines/viewers.js';
import type { Migration } from '../migrate.js';
import { createTableSql } from '../snapshots.js';

// `viewer_windows` (pipelines/viewers.ts) answers distinct viewers over long ranges; the aggregators write it from now
// on, and its past is computed here from `session_hours`. Emptied first, so a run again after a crash writes it once.
// Sessions open across the upgrade are exact again after a `darshak replay` of their hours (docs/store.md).
export const migration: Migration = {
  version: 4,
  name: 'viewer-windows',
  statements: [createTableSql(viewerWindows), 'TRUNCATE TABLE viewer_windows', viewerWindows.rebuild!(false)],
};
