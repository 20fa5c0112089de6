import { type Pipeline, type TableSpec } from '../src/aggregate/pipeline.js';

const kinds = new Set([
  'subscription_started',
  'subscription_renewed',
  'subscription_cancelled',
  'subscription_expired',
  'payment_succeeded',
  'payment_failed',
]);

/**
 * Subscription and payment events, one row each. Paid subscribers at an instant depend on each user's latest
 * subscription event before it, so the events themselves are the state; a late one simply lands in its place.
 */
export const billingEvents: TableSpec = {
  name: 'billing_events',
  engine: 'append',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime64(3)'],
    ['user_id', 'String'],
    ['kind', 'LowCardinality(String)'],
  ],
  values: [
    ['amount_inr', 'Float64'],
    ['plan', 'String'],
  ],
};

export const billing: Pipeline = {
  name: 'billing',
  tables: [billingEvents],
  event(e, out) {
    if (!kinds.has(e.event_type) || !e.user_id) return;
    const amount = e.properties?.amount_inr;
    const plan = e.properties?.plan;
    out.append(billingEvents, [e.tenant, e.ts, e.user_id, e.event_type, typeof amount === 'number' ? amount : 0, typeof plan === 'string' ? plan : '']);
  },
};
