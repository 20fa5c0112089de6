import { useState } from 'preact/hooks';
import { api, get } from '../api.js';
import { BarList } from '../components/bar-list.js';
import { Card } from '../components/card.js';
import { IndiaMap } from '../components/india-map.js';
import { ErrorNotice } from '../components/notice.js';
import { Segmented, rangeOptions } from '../components/segmented.js';
import { DataTable, Pager } from '../components/table.js';
import { formatHours, formatInt, formatPct } from '../format.js';
import type { DeviceItem, GeoItem, RangeName, TopContentItem } from '../types.js';
import { useQuery } from '../use-query.js';

const pageSize = 20;

export function ContentPage() {
  const [range, setRange] = useState<RangeName>('24h');
  const [offset, setOffset] = useState(0);
  const content = useQuery(
    () => api<TopContentItem[]>('GET', `/v1/analytics/top-content?range=${range}&limit=${pageSize}&offset=${offset}`),
    `${range}/${offset}`,
    60_000,
  );
  const geo = useQuery(() => get<GeoItem[]>(`/v1/analytics/geo?range=${range}&limit=200`), range, 60_000);
  const devices = useQuery(() => get<DeviceItem[]>(`/v1/analytics/devices?range=${range}`), range, 60_000);
  return (
    <>
      <div class="page-head">
        <h1>Content & audience</h1>
        <Segmented
          label="Range"
          value={range}
          options={rangeOptions}
          onChange={(r) => {
            setRange(r);
            setOffset(0);
          }}
        />
      </div>
      <div class="grid">
        <Card title="Top content" wide>
          <ErrorNotice error={content.error} />
          <DataTable
            caption="Top content by watch hours"
            rows={content.data?.data ?? []}
            rowKey={(c) => c.content_id}
            empty="No watch time in this range."
            columns={[
              { header: 'Title', cell: (c) => <span title={c.content_id}>{c.title || c.content_id}</span> },
              { header: 'Type', cell: (c) => c.content_type || '—' },
              { header: 'Watch hours', numeric: true, cell: (c) => formatHours(c.watch_hours) },
              { header: 'Completion', numeric: true, cell: (c) => formatPct(c.completion_pct) },
              { header: 'Viewers', numeric: true, cell: (c) => formatInt(c.unique_viewers) },
            ]}
          />
          <Pager
            label="Top content"
            offset={offset}
            limit={pageSize}
            total={content.data?.total ?? 0}
            onChange={setOffset}
          />
        </Card>
        <Card title="Watch time across India">
          <ErrorNotice error={geo.error} />
          <IndiaMap items={geo.data ?? []} />
        </Card>
        <Card title="Regions">
          <DataTable
            caption="Regions by watch hours"
            rows={geo.data ?? []}
            rowKey={(g) => g.region}
            empty="No viewers in this range."
            columns={[
              { header: 'Region', cell: (g) => g.region },
              { header: 'Watch hours', numeric: true, cell: (g) => formatHours(g.watch_hours) },
              { header: 'Viewers', numeric: true, cell: (g) => formatInt(g.viewers) },
              { header: 'Share', numeric: true, cell: (g) => formatPct(g.share_pct) },
            ]}
          />
        </Card>
        <Card title="Devices">
          <ErrorNotice error={devices.error} />
          <BarList
            label="Share of sessions by device"
            items={(devices.data ?? []).map((d) => ({ name: d.device, value: d.share_pct }))}
            format={formatPct}
            max={100}
          />
        </Card>
      </div>
    </>
  );
}
