import type { ClickHouseClient } from '@clickhouse/client';
import { revenueIn, subscribersAt } from '../../../pipelines/billing/read.js';
import { changePct, days, hours, selectParts, type Range, type Spans } from './range.js';
import { viewerCounts, viewersQuery, type ViewerRow } from '../../../pipelines/viewers/read.js';
import type { Overview } from './answers.js';
import { watchMsIn } from '../../../pipelines/watch-time/read.js';

// Each figure is asked for several ranges (the range, the last 7 days, the 7 before, the 30-day month). One scan per
// table answers all of them with conditional aggregates, rather than one scan per range; viewers come from one scan of
// a window of `viewer_windows` (pipelines/viewers/read.ts). The four scans run as one statement (selectParts).

/** The range and the two weeks before its end, by the names of their parameters; `all` bounds their scans. */
const spans: Spans = { range: ['from_s', 'to_s'], week1: ['week1_s', 'to_s'], week0: ['week0_s', 'week1_s'] };
const all = ['earliest_s', 'to_s'] as const;

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
    watch: { query: watchMsIn(spans, all), params },
    revenue: { query: revenueIn(spans, all), params },
    users: {
      query: subscribersAt({ at_to: 'to_order', at_from: 'from_order', at_week1: 'week1_order' }, [
        'from_order',
        'to_order',
      ]),
      params,
    },
  });
  const viewers = viewerCounts(parts.viewers, viewerRanges).get('') ?? [0, 0, 0];
  const [watch, revenue, users] = [parts.watch[0], parts.revenue[0], parts.users[0]];
  const paidNow = num(users, 'at_to');
  const paidAtFrom = num(users, 'at_from');
  return {
    monthly_active_users: viewers[0]!,
    watch_hours: hours(num(watch, 'range')),
    paid_subscribers: paidNow,
    arpu_inr: paidNow === 0 ? 0 : num(revenue, 'range') / paidNow,
    churn_pct: paidAtFrom === 0 ? 0 : (num(users, 'churned') / paidAtFrom) * 100,
    wow_delta: {
      mau: changePct(viewers[1]!, viewers[2]!),
      watch_hours: changePct(hours(num(watch, 'week1')), hours(num(watch, 'week0'))),
      subs: changePct(paidNow, num(users, 'at_week1')),
      revenue: changePct(num(revenue, 'week1'), num(revenue, 'week0')),
    },
  };
}
