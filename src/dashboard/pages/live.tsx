import { useEffect, useMemo, useState } from 'preact/hooks';
import { get, getAll } from '../api.js';
import { BarList } from '../components/bar-list.js';
import { Badge, Card } from '../components/card.js';
import { LineChart, type Point } from '../components/line-chart.js';
import { ErrorNotice } from '../components/notice.js';
import { Segmented, rangeOptions } from '../components/segmented.js';
import { formatInt, formatMs, formatPct, formatTime } from '../format.js';
import { liveStatus, onLive } from '../live.js';
import type { BitrateItem, ConcurrencySeries, QosItem, RangeName } from '../types.js';
import { useQuery } from '../use-query.js';

/** Seconds of live history kept on the chart. */
const liveSeconds = 300;

function LiveViewers() {
  const [points, setPoints] = useState<Point[]>([]);
  useEffect(
    () =>
      onLive((m) => {
        if (m.type !== 'concurrency') return;
        const t = Date.parse(m.ts) / 1000;
        setPoints((old) => [...old.filter((p) => p.t > t - liveSeconds && p.t !== t), { t, value: m.value }]);
      }),
    [],
  );
  const now = points.at(-1);
  const peak = points.reduce<Point | null>((best, p) => (best && best.value >= p.value ? best : p), null);
  const status = liveStatus.value;
  return (
    <Card
      title="Concurrent viewers, live"
      wide
      actions={
        <Badge tone={status === 'open' ? 'ok' : 'muted'}>
          {status === 'open' ? 'live' : status === 'connecting' ? 'connecting…' : 'reconnecting…'}
        </Badge>
      }
    >
      <div class="live-figures">
        <div>
          <div class="big" data-testid="live-value" aria-live="off">
            {now ? formatInt(now.value) : '—'}
          </div>
          <div class="muted">
            {now ? `watching at ${formatTime(new Date(now.t * 1000).toISOString())}` : 'waiting for the first second…'}
          </div>
        </div>
        <div>
          <div class="mid">{peak ? formatInt(peak.value) : '—'}</div>
          <div class="muted">
            peak, last 5 minutes{peak ? ` (${formatTime(new Date(peak.t * 1000).toISOString())})` : ''}
          </div>
        </div>
      </div>
      <LineChart
        points={points}
        peak={peak}
        span={liveSeconds}
        label={`Concurrent viewers over the last 5 minutes: now ${now ? formatInt(now.value) : 'unknown'}, peak ${peak ? formatInt(peak.value) : 'unknown'}`}
      />
    </Card>
  );
}

const intervals = [
  [1, '1 min'],
  [5, '5 min'],
  [15, '15 min'],
  [60, '1 hour'],
] as const;

function ConcurrencyHistory() {
  const [range, setRange] = useState<RangeName>('24h');
  const [interval, setIntervalMinutes] = useState<1 | 5 | 15 | 60>(5);
  // 1- and 5-minute points are for 24 h only (docs/api.md).
  const effective = range !== '24h' && interval < 15 ? 15 : interval;
  const series = useQuery(
    () => get<ConcurrencySeries>(`/v1/analytics/concurrency?range=${range}&interval=${effective}`),
    `${range}/${effective}`,
    60_000,
  );
  const points = useMemo(
    () => (series.data?.points ?? []).map((p) => ({ t: Date.parse(p.ts) / 1000, value: p.value })),
    [series.data],
  );
  const s = series.data;
  const peak = s && s.peak > 0 ? { t: Date.parse(s.peak_at) / 1000, value: s.peak } : null;
  return (
    <Card
      title="Concurrent viewers, history"
      wide
      actions={
        <>
          <Segmented label="Range" value={range} options={rangeOptions} onChange={setRange} />
          <Segmented
            label="Interval"
            value={effective}
            options={range === '24h' ? intervals : intervals.slice(2)}
            onChange={setIntervalMinutes}
          />
        </>
      }
    >
      <ErrorNotice error={series.error} />
      <p class="muted">
        {s
          ? `Peak ${formatInt(s.peak)}${s.peak > 0 ? ` at ${new Date(s.peak_at).toLocaleString()}` : ''}; each point is the highest second of its ${effective}-minute interval.`
          : 'Loading…'}
      </p>
      <LineChart
        points={points}
        peak={peak}
        stepped
        label={`Concurrent viewers per ${effective} minutes over ${range}; peak ${s ? formatInt(s.peak) : 'unknown'}`}
      />
    </Card>
  );
}

function Qos() {
  const [range, setRange] = useState<RangeName>('24h');
  const qos = useQuery(() => get<QosItem[]>(`/v1/analytics/qos?range=${range}&limit=12`), range, 15_000);
  const rows = qos.data ?? [];
  return (
    <>
      <div class="page-head sub">
        <h2>Quality of experience by region</h2>
        <Segmented label="QoS range" value={range} options={rangeOptions} onChange={setRange} />
      </div>
      <ErrorNotice error={qos.error} />
      <div class="grid three">
        <Card title="Rebuffer rate">
          <BarList
            label="Rebuffer rate by region"
            items={rows.map((r) => ({ name: r.region, value: r.rebuffer_rate }))}
            format={formatPct}
          />
        </Card>
        <Card title="Startup time, p50 (p95)">
          <BarList
            label="Startup time by region"
            items={rows.map((r) => ({ name: r.region, value: r.startup_p50_ms, secondary: r.startup_p95_ms }))}
            format={formatMs}
            empty="No startups in this range."
          />
        </Card>
        <Card title="Error rate">
          <BarList
            label="Error rate by region"
            items={rows.map((r) => ({ name: r.region, value: r.error_rate }))}
            format={formatPct}
          />
        </Card>
      </div>
    </>
  );
}

/** Per device, the mean bitrate over its watch time of known bitrate (each item's mean weighted by that time). */
function bitrateByDevice(items: readonly BitrateItem[]): Array<{ name: string; value: number }> {
  const sums = new Map<string, { kbpsHours: number; hours: number }>();
  for (const i of items) {
    if (i.avg_bitrate_kbps === null) continue;
    const known = i.renditions.reduce((h, r) => (r.bucket === 'unknown' ? h : h + r.watch_hours), 0);
    const s = sums.get(i.device) ?? { kbpsHours: 0, hours: 0 };
    sums.set(i.device, { kbpsHours: s.kbpsHours + i.avg_bitrate_kbps * known, hours: s.hours + known });
  }
  return [...sums]
    .filter(([, s]) => s.hours > 0)
    .map(([name, s]) => ({ name, value: s.kbpsHours / s.hours }))
    .sort((a, b) => b.value - a.value);
}

/** Each rendition bucket's share of all watch time, in bucket order (as the API orders a region and device's). */
function renditionShares(items: readonly BitrateItem[]): Array<{ name: string; value: number }> {
  const hours = new Map<string, number>();
  let total = 0;
  for (const i of items)
    for (const r of i.renditions) {
      hours.set(r.bucket, (hours.get(r.bucket) ?? 0) + r.watch_hours);
      total += r.watch_hours;
    }
  const order = (b: string): number => (b === 'unknown' ? Infinity : Number.parseInt(b, 10));
  return [...hours]
    .sort(([a], [b]) => order(a) - order(b))
    .map(([bucket, h]) => ({
      name: bucket === 'unknown' ? 'unknown' : `${bucket} kbps`,
      value: total > 0 ? (h / total) * 100 : 0,
    }));
}

const formatKbps = (kbps: number): string => `${formatInt(kbps)} kbps`;

function Bitrate() {
  const [range, setRange] = useState<RangeName>('24h');
  const bitrate = useQuery(() => getAll<BitrateItem>(`/v1/analytics/bitrate?range=${range}`), range, 15_000);
  const items = bitrate.data ?? [];
  return (
    <>
      <div class="page-head sub">
        <h2>Video quality</h2>
        <Segmented label="Bitrate range" value={range} options={rangeOptions} onChange={setRange} />
      </div>
      <ErrorNotice error={bitrate.error} />
      <div class="grid">
        <Card title="Mean bitrate by device">
          <BarList
            label="Mean bitrate by device"
            items={bitrateByDevice(items)}
            format={formatKbps}
            empty="No bitrate reported in this range."
          />
        </Card>
        <Card title="Watch time by rendition">
          <BarList label="Watch time by rendition" items={renditionShares(items)} format={formatPct} />
        </Card>
      </div>
    </>
  );
}

export function LivePage() {
  return (
    <>
      <div class="page-head">
        <h1>Live</h1>
      </div>
      <div class="grid">
        <LiveViewers />
        <ConcurrencyHistory />
      </div>
      <Qos />
      <Bitrate />
    </>
  );
}
