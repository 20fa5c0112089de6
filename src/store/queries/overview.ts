import type { ClickHouseClient } from '@clickhouse/client';
import { subscriptionRank } from '../../../pipelines/billing.js';
import { changePct, days, hours, selectParts, type Range } from './range.js';
import { viewerCounts, viewersQuery, type ViewerRow } from './viewers.js';
import type { Overview } from './answers.js';

// Each figure is asked for several ranges (the range, the last 7 days, the 7 before, the 30-day month). One scan per
// table answers all of them with conditional aggregates, rather than one scan per range; viewers come from one scan of
// a window of `viewer_windows` (queries/viewers.ts). The four scans run as one statement (selectParts).

const sec = (p: string): string => `toDateTime({${p}:UInt32}, 'UTC')`;
const bucketIn = (from: string, to: string): string => `ts >= ${sec(from)} AND ts < ${sec(to)}`;

const watchSql = `SELECT
    sumIf(watch_ms, ${bucketIn('from_s', 'to_s')}) AS range,
    sumIf(watch_ms, ${bucketIn('week1_s', 'to_s')}) AS week1,
    sumIf(watch_ms, ${bucketIn('week0_s', 'week1_s')}) AS week0
  FROM watch_time_minutes WHERE tenant = {tenant:String} AND ts >= ${sec('earliest_s')} AND ts < ${sec('to_s')}`;

const revenueSql = `SELECT
    sumIf(amount_inr, ${bucketIn('from_s', 'to_s')}) AS revenue,
    sumIf(amount_inr, ${bucketIn('week1_s', 'to_s')}) AS revenue1,
    sumIf(amount_inr, ${bucketIn('week0_s', 'week1_s')}) AS revenue0
  FROM billing_events WHERE tenant = {tenant:String} AND kind = 'payment_succeeded' AND ts >= ${sec('earliest_s')} AND ts < ${sec('to_s')}`;

/**
 * Per user, from their subscription events: whether the latest before each instant is started or renewed (paid), and
 * whether one in the range is a cancellation or expiry (churned). Equal timestamps are ordered by rank (started,
 * renewed, cancelled, expired), so the answer never depends on arrival. `sub_order` is ts × 8 + rank (0 for any other
 * kind): "the latest before t" is a plain max below t × 8, and its kind the low bits, so the scan reads two columns
 * (ts < t exactly when sub_order < t × 8, the rank being under 8). Users are grouped by `user_key`, the 128-bit hash
 * of their id that uniqExact would compute, stored at insert (pipelines/billing.ts).
 */
const latestBefore = (p: string): string => `maxIf(sub_order, sub_order < {${p}:UInt64}) % 8`;
const paid = (column: string): string => `countIf(${column} IN (${subscriptionRank('subscription_started')}, ${subscriptionRank('subscription_renewed')}))`;
const ended = `(${subscriptionRank('subscription_cancelled')}, ${subscriptionRank('subscription_expired')})`;
const usersSql = `SELECT ${paid('at_to')} AS at_to, ${paid('at_from')} AS at_from, ${paid('at_week1')} AS at_week1, countIf(churned) AS churned FROM (
    SELECT max(sub_order) % 8 AS at_to, ${latestBefore('from_order')} AS at_from, ${latestBefore('week1_order')} AS at_week1,
      max(sub_order % 8 IN ${ended} AND sub_order >= {from_order:UInt64}) AS churned
    FROM billing_events WHERE tenant = {tenant:String} AND sub_order % 8 != 0 AND sub_order < {to_order:UInt64}
    GROUP BY user_key
  )`;

type Row = Record<string, string | number | null>;
const num = (row: Row | undefined, key: string): number => Number(row?.[key] ?? 0);

/** docs/metrics.md "Overview". */
export async function overview(client: ClickHouseClient, tenant: string, range: Range): Promise<Overview> {
  const to = range.to;
  const week1 = to - days(7);
  const week0 = to - days(14);
  const month = to - days(30);
  const earliest = Math.min(range.from, week0);
  const params = {
    tenant,
    to_order: to * 8,
    from_order: range.from * 8,
    week1_order: week1 * 8,
    to_s: to / 1000,
    from_s: range.from / 1000,
    week1_s: week1 / 1000,
    week0_s: week0 / 1000,
    earliest_s: earliest / 1000,
  };
  // The month always lies within one window.
  const viewerRanges = [
    { from: month, to },
    { from: week1, to },
    { from: week0, to: week1 },
  ];
  const parts = await selectParts<{ viewers: ViewerRow; watch: Row; revenue: Row; users: Row }>(client, {
    viewers: viewersQuery(tenant, '', viewerRanges)!,
    watch: { query: watchSql, params },
    revenue: { query: revenueSql, params },
    users: { query: usersSql, params },
  });
  const viewers = viewerCounts(parts.viewers, viewerRanges).get('') ?? [0, 0, 0];
  const [watch, revenue, users] = [parts.watch[0], parts.revenue[0], parts.users[0]];
  const paidNow = num(users, 'at_to');
  const paidAtFrom = num(users, 'at_from');
  return {
    monthly_active_users: viewers[0]!,
    watch_hours: hours(num(watch, 'range')),
    paid_subscribers: paidNow,
    arpu_inr: paidNow === 0 ? 0 : num(revenue, 'revenue') / paidNow,
    churn_pct: paidAtFrom === 0 ? 0 : (num(users, 'churned') / paidAtFrom) * 100,
    wow_delta: {
      mau: changePct(viewers[1]!, viewers[2]!),
      watch_hours: changePct(hours(num(watch, 'week1')), hours(num(watch, 'week0'))),
      subs: changePct(paidNow, num(users, 'at_week1')),
      revenue: changePct(num(revenue, 'revenue1'), num(revenue, 'revenue0')),
    },
  };
}
