import { useState } from 'preact/hooks';
import { get } from '../api.js';
import { BarList } from '../components/bar-list.js';
import { Card, Tile } from '../components/card.js';
import { ErrorNotice } from '../components/notice.js';
import { Segmented, rangeOptions } from '../components/segmented.js';
import { formatCompact, formatDelta, formatHours, formatInr, formatPct } from '../format.js';
import type { GeoItem, Overview, RangeName, TopContentItem } from '../types.js';
import { useQuery } from '../use-query.js';

export function OverviewPage() {
  const [range, setRange] = useState<RangeName>('24h');
  const overview = useQuery(() => get<Overview>(`/v1/analytics/overview?range=${range}`), range, 60_000);
  const content = useQuery(
    () => get<TopContentItem[]>(`/v1/analytics/top-content?range=${range}&limit=5`),
    range,
    60_000,
  );
  const geo = useQuery(() => get<GeoItem[]>(`/v1/analytics/geo?range=${range}&limit=5`), range, 60_000);
  const o = overview.data;
  return (
    <>
      <div class="page-head">
        <h1>Overview</h1>
        <Segmented label="Range" value={range} options={rangeOptions} onChange={setRange} />
      </div>
      <ErrorNotice error={overview.error} />
      <div class="tiles" aria-busy={overview.loading && !o}>
        <Tile
          label="Monthly active users"
          value={o ? formatCompact(o.monthly_active_users) : '…'}
          delta={o?.wow_delta.mau}
        />
        <Tile label="Watch hours" value={o ? formatHours(o.watch_hours) : '…'} delta={o?.wow_delta.watch_hours} />
        <Tile label="Paid subscribers" value={o ? formatCompact(o.paid_subscribers) : '…'} delta={o?.wow_delta.subs} />
        <Tile label="ARPU" value={o ? formatInr(o.arpu_inr) : '…'} />
        <Tile label="Churn" value={o ? formatPct(o.churn_pct) : '…'} />
        <Tile label="Revenue, week over week" value={o ? formatDelta(o.wow_delta.revenue) : '…'} />
      </div>
      <div class="grid">
        <Card title="Most watched">
          <ErrorNotice error={content.error} />
          <BarList
            label="Watch hours by title"
            items={(content.data ?? []).map((c) => ({ name: c.title || c.content_id, value: c.watch_hours }))}
            format={formatHours}
          />
        </Card>
        <Card title="Top regions">
          <ErrorNotice error={geo.error} />
          <BarList
            label="Share of watch time by region"
            items={(geo.data ?? []).map((g) => ({ name: g.region, value: g.share_pct }))}
            format={formatPct}
            max={100}
          />
        </Card>
      </div>
    </>
  );
}
