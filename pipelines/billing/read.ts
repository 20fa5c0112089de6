import { inRange, sumsIn, type Spans } from '../../src/store/queries/range.js';
import {
  billingColumns as b,
  billingEvents,
  subscriptionRank,
  subscriptionUserColumns as u,
  subscriptionUsers,
} from './pipeline.js';

/**
 * The tenant's revenue (successful payments, INR) in each of `spans` in one scan, each in the column of its name
 * (docs/metrics.md "Overview": ARPU and `wow_delta.revenue`); `all` bounds the scan.
 */
export const revenueIn = (spans: Spans, all: readonly [string, string]): string =>
  `SELECT ${sumsIn(spans, b.amount_inr, b.ts)}
  FROM ${billingEvents.name} WHERE ${b.tenant} = {tenant:String} AND ${b.kind} = 'payment_succeeded' AND ${inRange(b.ts, ...all)}`;

/**
 * Per user, from the `sub_order`s of their subscription events (`subscription_users`, one row per user, ascending):
 * whether the latest before each instant is started or renewed (paid), and whether one in the range is a cancellation
 * or expiry (churned). `sub_order` is ts × 8 + the kind's rank (started, renewed, cancelled, expired), so equal
 * timestamps are ordered by rank and the answer never depends on arrival; "before t" is `sub_order < t × 8`, the rank
 * being under 8, and the kind is the low 3 bits (a user with none before t reads 0: not paid).
 */
const kindBefore = (p: string): string => `arrayLast(o -> o < {${p}:UInt64}, ${u.orders}) % 8`;
const paid = (p: string): string =>
  `countIf(${kindBefore(p)} IN (${subscriptionRank('subscription_started')}, ${subscriptionRank('subscription_renewed')}))`;
const ended = `(${subscriptionRank('subscription_cancelled')}, ${subscriptionRank('subscription_expired')})`;

/**
 * The tenant's paid subscribers at each instant of `paidAt` (a column name → the name of a `UInt64` parameter holding
 * the instant in ms × 8), and, as `churned`, the users whose subscription was cancelled or expired within `churn`
 * (the same kind of parameters): docs/metrics.md "Overview" `paid_subscribers`, `churn_pct` and `wow_delta.subs`.
 */
export const subscribersAt = (paidAt: Record<string, string>, churn: readonly [from: string, to: string]): string =>
  `SELECT ${Object.entries(paidAt)
    .map(([name, p]) => `${paid(p)} AS ${name}`)
    .join(', ')},
    countIf(arrayExists(o -> o >= {${churn[0]}:UInt64} AND o < {${churn[1]}:UInt64} AND o % 8 IN ${ended}, ${u.orders})) AS churned
  FROM ${subscriptionUsers.name} FINAL WHERE ${u.tenant} = {tenant:String}`;
