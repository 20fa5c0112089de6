import type { ClickHouseClient } from '@clickhouse/client';
import { changePct, days, hours, inRange, rangeParams, select, sessionsInRange, type Range } from './range.js';

export interface Overview {
  monthly_active_users: number;
  watch_hours: number;
  paid_subscribers: number;
  arpu_inr: number;
  churn_pct: number;
  wow_delta: { mau: number; watch_hours: number; subs: number; revenue: number };
}

const viewersSql = `SELECT uniqExactIf(viewer, viewer != '') AS n FROM ${sessionsInRange}`;
const watchSql = `SELECT sum(watch_ms) AS n FROM watch_time_minutes WHERE tenant = {tenant:String} AND ${inRange()}`;
const revenueSql = `SELECT sum(amount_inr) AS n FROM billing_events
  WHERE tenant = {tenant:String} AND kind = 'payment_succeeded' AND ${inRange()}`;
const churnedSql = `SELECT uniqExact(user_id) AS n FROM billing_events
  WHERE tenant = {tenant:String} AND kind IN ('subscription_cancelled', 'subscription_expired') AND ${inRange()}`;
/**
 * Users whose latest subscription event before `to_ms` is started or renewed. Equal timestamps are ordered by
 * subscription_rank (started, renewed, cancelled, expired), so the answer never depends on arrival.
 */
const paidSql = `SELECT count() AS n FROM (
    SELECT user_id, argMax(kind, (ts, indexOf(['subscription_started', 'subscription_renewed', 'subscription_cancelled', 'subscription_expired'], kind))) AS latest
    FROM billing_events
    WHERE tenant = {tenant:String} AND kind LIKE 'subscription\\_%' AND ts < fromUnixTimestamp64Milli({to_ms:Int64}, 'UTC')
    GROUP BY user_id
  ) WHERE latest IN ('subscription_started', 'subscription_renewed')`;

async function one(client: ClickHouseClient, sql: string, tenant: string, r: Range): Promise<number> {
  const [row] = await select<{ n: string | number | null }>(client, sql, rangeParams(tenant, r));
  return Number(row?.n ?? 0);
}

/** docs/metrics.md "Overview". */
export async function overview(client: ClickHouseClient, tenant: string, range: Range): Promise<Overview> {
  const to = range.to;
  const week = { from: to - days(7), to };
  const weekBefore = { from: to - days(14), to: to - days(7) };
  const q = (sql: string, r: Range): Promise<number> => one(client, sql, tenant, r);
  const paidAt = (t: number): Promise<number> => q(paidSql, { from: t, to: t });
  const [mau, watchMs, paid, revenue, churned, paidAtFrom, mau1, mau0, watch1, watch0, subs0, rev1, rev0] = await Promise.all([
    q(viewersSql, { from: to - days(30), to }),
    q(watchSql, range),
    paidAt(to),
    q(revenueSql, range),
    q(churnedSql, range),
    paidAt(range.from),
    q(viewersSql, week),
    q(viewersSql, weekBefore),
    q(watchSql, week),
    q(watchSql, weekBefore),
    paidAt(to - days(7)),
    q(revenueSql, week),
    q(revenueSql, weekBefore),
  ]);
  return {
    monthly_active_users: mau,
    watch_hours: hours(watchMs),
    paid_subscribers: paid,
    arpu_inr: paid === 0 ? 0 : revenue / paid,
    churn_pct: paidAtFrom === 0 ? 0 : (churned / paidAtFrom) * 100,
    wow_delta: { mau: changePct(mau1, mau0), watch_hours: changePct(hours(watch1), hours(watch0)), subs: changePct(paid, subs0), revenue: changePct(rev1, rev0) },
  };
}
