import { billingEvents } from '../../../pipelines/billing.js';
import type { Migration } from '../migrate.js';
import { createTableSql } from '../snapshots.js';

const derived = billingEvents.derived!;

// `user_key` and `sub_order` (pipelines/billing.ts), added to a store created before them and computed for the rows it
// holds. Every statement can run again after a crash.
export const migration: Migration = {
  version: 6,
  name: 'billing-keys',
  statements: [
    createTableSql(billingEvents),
    `ALTER TABLE billing_events ${derived.map(([name, type, expression]) => `ADD COLUMN IF NOT EXISTS ${name} ${type} MATERIALIZED ${expression}`).join(', ')}`,
    `ALTER TABLE billing_events ${derived.map(([name]) => `MATERIALIZE COLUMN ${name}`).join(', ')} SETTINGS mutations_sync = 2`,
  ],
};
