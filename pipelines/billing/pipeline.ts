import { columns, minuteOf, type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';
import { pct, round, severityOf, windowFields, windowSpans, windowDetector } from '../../src/metric/detector.js';

/** Subscription events in their tie order (docs/metrics.md): `sub_order`'s low 3 bits are the 1-based index here. */
const subscriptionKinds = [
  'subscription_started',
  'subscription_renewed',
  'subscription_cancelled',
  'subscription_expired',
] as const;
/** The same, as a ClickHouse array literal. */
const subscriptionKindsSql = `['${subscriptionKinds.join("', '")}']`;
/** A subscription kind's rank, the low 3 bits of its `sub_order`. */
export const subscriptionRank = (kind: (typeof subscriptionKinds)[number]): number =>
  subscriptionKinds.indexOf(kind) + 1;

const kinds = new Set<string>([...subscriptionKinds, 'payment_succeeded', 'payment_failed']);

/** The 128-bit hash of a user id that `uniqExact` would compute: the key users are grouped and stored by. */
const userKey = (id: string): string => `reinterpretAsUInt128(sipHash128(${id}))`;

/**
 * Subscription and payment events, one row each. Paid subscribers at an instant depend on each user's latest
 * subscription event before it, so the events themselves are the state; a late one simply lands in its place.
 * `user_key` (see `userKey`) and `sub_order` (ts × 8 + the kind's tie rank, 0 for a payment) are computed at insert.
 */
export const billingEvents = {
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
  derived: [
    ['user_key', 'UInt128', userKey('user_id')],
    ['sub_order', 'UInt64', `toUInt64(toUnixTimestamp64Milli(ts)) * 8 + indexOf(${subscriptionKindsSql}, kind)`],
  ],
} as const satisfies TableSpec;

export const billingColumns = columns(billingEvents);

/** Per user of the `billing_events` rows `where` selects: their subscription events' `sub_order`s and latest time. */
const usersOf = (
  where: string,
): string => `SELECT tenant, user_key, groupUniqArray(sub_order) AS orders, max(ts) AS last_ts FROM billing_events
  WHERE ${where} AND sub_order % 8 != 0 GROUP BY tenant, user_key`;

/** The version of a refresh: its time, and above every version the tenant has, should the clock step back. */
const refreshVersion = `greatest(toUInt64(toUnixTimestamp64Nano(now64(9))), (SELECT max(version) + 1 FROM subscription_users WHERE tenant = {tenant:String}))`;

/**
 * Per user, the `sub_order` of each of their subscription events, ascending (docs/store.md "Paid subscribers"): the
 * overview reads a user's latest event before an instant from one row, rather than grouping every subscription event
 * by user at each call. ClickHouse keeps it from `billing_events`: each insert there recomputes the rows of the users
 * it wrote from all their events, so a late event lands in place. The latest refresh of a user wins (`version`, its
 * time). A user left with no subscription event (a replay removed them) keeps a row with none, which counts nowhere.
 * `last_ts`, the latest event's time, bounds retention.
 */
export const subscriptionUsers = {
  name: 'subscription_users',
  engine: 'replace',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['user_key', 'UInt128'],
  ],
  values: [
    ['last_ts', 'DateTime64(3)'],
    ['orders', 'Array(UInt64)'],
    ['version', 'UInt64'],
  ],
  derivedFrom: {
    table: 'billing_events',
    by: 'user_id',
    // Users with a subscription event, or a row already (whose events a replay may have removed): not payers alone.
    refresh: `INSERT INTO subscription_users (tenant, user_key, last_ts, orders, version)
      SETTINGS insert_deduplicate = 0, insert_deduplication_token = ''
      SELECT {tenant:String}, k, if(empty(sub.orders), now64(3), sub.last_ts), arraySort(sub.orders), ${refreshVersion}
      FROM (SELECT ${userKey('arrayJoin({keys:Array(String)})')} AS k) AS users
      LEFT JOIN (${usersOf('tenant = {tenant:String} AND user_id IN {keys:Array(String)}')}) AS sub ON users.k = sub.user_key
      WHERE notEmpty(sub.orders) OR k IN (SELECT user_key FROM subscription_users WHERE tenant = {tenant:String})`,
    fill: `INSERT INTO subscription_users (tenant, user_key, last_ts, orders, version)
      SETTINGS insert_deduplicate = 0, insert_deduplication_token = ''
      SELECT tenant, user_key, last_ts, arraySort(orders), toUInt64(toUnixTimestamp64Nano(now64(9))) FROM (${usersOf('1')})`,
  },
} as const satisfies TableSpec;

export const subscriptionUserColumns = columns(subscriptionUsers);

const hour = 3600;
const day = 86_400;

/** 15 minutes (by default) of payments: failed / all. Severity is the failure rate against the threshold. */
export const paymentFailure = windowDetector({
  kind: 'window',
  category: 'billing.payment_failure',
  source: 'billing',
  signal: 'billing',
  bucketSeconds: 60,
  historyBuckets: 60,
  running: 1,
  params: {
    window_minutes: 'payments of this many minutes are counted',
    max_window_minutes: 'and, when that window has too few failures, of this many',
    min_failure_pct: 'failed payments are at least this percentage of all payments',
    min_failures: 'and at least this many',
  },
  evaluate(w) {
    const t = w.thresholds;
    for (const span of windowSpans(t)) {
      const cur = windowFields(w, span);
      const failed = cur.failed ?? 0;
      if (failed < t.min_failures) continue;
      const rate = pct(failed, cur.payments ?? 0);
      if (rate < t.min_failure_pct) continue;
      const severity = severityOf(rate, t.min_failure_pct);
      return {
        severity,
        title: 'Payment failures',
        description: `${failed} of ${cur.payments} payments failed in the last ${span} minutes (${round(rate)} %).`,
        data: { severity, failure_rate: round(rate), failed_payments: failed, window_minutes: span },
      };
    }
    return null;
  },
});

/** Cancellations in the current UTC hour against the mean of the same hour on the 7 days before. */
export const churnSpike = windowDetector({
  kind: 'window',
  category: 'billing.churn_spike',
  source: 'billing',
  signal: 'billing',
  bucketSeconds: 3600,
  historyBuckets: 7 * 24 + 1,
  running: 1,
  params: {
    ratio: 'the hour\u2019s cancellations are at least this many times the mean of the same hour on the 7 days before',
    min_cancellations: 'and at least this many',
  },
  evaluate(w) {
    const t = w.thresholds;
    const n = w.at(w.bucket)?.cancellations ?? 0;
    // A baseline needs the 7 days behind it: until then every hour would look like a spike.
    if (n < t.min_cancellations || w.since > w.bucket - 7 * day) return null;
    let total = 0;
    for (let d = 1; d <= 7; d++) total += w.at(w.bucket - d * day)?.cancellations ?? 0;
    const base = total / 7;
    if (n < t.ratio * base) return null;
    const severity = severityOf(n, base);
    return {
      severity,
      title: 'Churn spike',
      description: `${n} cancellations this hour against ${round(base)} in the same hour on the last 7 days.`,
      data: { severity, cancellations: n, baseline: round(base), window_minutes: hour / 60 },
    };
  },
});

export const billing: Pipeline = {
  name: 'billing',
  tables: [billingEvents, subscriptionUsers],
  detectors: [paymentFailure, churnSpike],
  event(e, out) {
    if (!kinds.has(e.event_type) || !e.user_id) return;
    // Detector signal `billing` [tenant] per minute: payments (failed or not), failed, cancellations.
    const payment = e.event_type === 'payment_succeeded' || e.event_type === 'payment_failed';
    const failed = e.event_type === 'payment_failed';
    const cancelled = e.event_type === 'subscription_cancelled';
    if (payment || cancelled)
      out.signal('billing', [e.tenant], minuteOf(e.ts), {
        payments: payment ? 1 : 0,
        failed: failed ? 1 : 0,
        cancellations: cancelled ? 1 : 0,
      });
    const amount = e.properties?.amount_inr;
    const plan = e.properties?.plan;
    out.append(billingEvents, [
      e.tenant,
      e.ts,
      e.user_id,
      e.event_type,
      typeof amount === 'number' ? amount : 0,
      typeof plan === 'string' ? plan : '',
    ]);
  },
};
