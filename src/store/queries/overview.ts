import type { ClickHouseClient } from '@clickhouse/client';
import { billingEvents, subscriptionRank, subscriptionUsers } from '../../../pipelines/billing.js';
import { changePct, days, hours, selectParts, type Range } from './range.js';
import { viewerCounts, viewersQuery, type ViewerRow } from './viewers.js';
import type { Overview } from './answers.js';
import { watchTimeMinutes } from '../../../pipelines/watch-time.js';

// Each figure is asked for several ranges (the range, the last 7 days, the 7 before, the 30-day month). One scan per
// table answers all of them with conditional aggregates, rather than one scan per range; viewers come from one scan of
// a window of `viewer_windows` (queries/viewers.ts). The four scans run as one statement (selectParts).

const sec = (p: string): string => `toDateTime({${p}:UInt32}, 'UTC')`;
const bucketIn = (from: string, to: string): string => `ts >= ${sec(from)} AND ts < ${sec(to)}`;

const watchSql = `SELECT
    sumIf(watch_ms, ${bucketIn('from_s', 'to_s')}) AS range,
    sumIf(watch_ms, ${bucketIn('week1_s', 'to_s')}) AS week1,
    sumIf(watch_ms, ${bucketIn('week0_s', 'week1_s')}) AS week0
  FROM ${watchTimeMinutes.name} WHERE tenant = {tenant:String} AND ts >= ${sec('earliest_s')} AND ts < ${sec('to_s')}`;

const revenueSql = `SELECT
    sumIf(amount_inr, ${bucketIn('from_s', 'to_s')}) AS revenue,
    sumIf(amount_inr, ${bucketIn('week1_s', 'to_s')}) AS revenue1,
    sumIf(amount_inr, ${bucketIn('week0_s', 'week1_s')}) AS revenue0
  FROM ${billingEvents.name} WHERE tenant = {tenant:String} AND kind = 'payment_succeeded' AND ts >= ${sec('earliest_s')} AND ts < ${sec('to_s')}`;

/**
 * Per user, from the `sub_order`s of their subscription events (`subscription_users`, one row per user, ascending):
 * whether the latest before each instant is started or renewed (paid), and whether one in the range is a cancellation
 * or expiry (churned). `sub_order` is ts × 8 + the kind's rank (started, renewed, cancelled, expired), so equal
 * timestamps are ordered by rank and the answer never depends on arrival; "before t" is `sub_order < t × 8`, the rank
 * being under 8, and the kind is the low 3 bits (a user with none before t reads 0: not paid).
 */
const kindBefore = (p: string): string => `arrayLast(o -> o < {${p}:UInt64}, orders) % 8`;
const paid = (p: string): string =>
  `countIf(${kindBefore(p)} IN (${subscriptionRank('subscription_started')}, ${subscriptionRank('subscription_renewed')}))`;
const ended = `(${subscriptionRank('subscription_cancelled')}, ${subscriptionRank('subscription_expired')})`;
const usersSql = `SELECT ${paid('to_order')} AS at_to, ${paid('from_order')} AS at_from, ${paid('week1_order')} AS at_week1,
    countIf(arrayExists(o -> o >= {from_order:UInt64} AND o < {to_order:UInt64} AND o % 8 IN ${ended}, orders)) AS churned
  FROM ${subscriptionUsers.name} FINAL WHERE tenant = {tenant:String}`;

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
