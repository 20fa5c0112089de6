import { billingEvents, subscriptionUsers } from '../../../pipelines/billing.js';
import type { Migration } from '../migrate.js';
import { createTableSql } from '../snapshots.js';

// `subscription_users` (pipelines/billing.ts) answers paid subscribers and churn; every insert into `billing_events`
// keeps it from now on, and its past is computed here from `billing_events`. Emptied first, so a run again after a
// crash writes it once. `billing_events` is created first on a new store, where the snapshot tables come after.
export const migration: Migration = {
  version: 8,
  name: 'subscription-users',
  statements: [createTableSql(billingEvents), createTableSql(subscriptionUsers), 'TRUNCATE TABLE subscription_users', subscriptionUsers.derivedFrom!.fill],
};
