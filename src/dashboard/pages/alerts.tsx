import { useEffect, useState } from 'preact/hooks';
import { cohortMeasure } from '../../contracts/alert-cohort.js';
import { ApiError, api, can } from '../api.js';
import { Button } from '../components/button.js';
import { Badge } from '../components/card.js';
import { SelectField } from '../components/field.js';
import { ErrorNotice, Notice } from '../components/notice.js';
import { Pager } from '../components/table.js';
import { LineChart, type Point } from '../components/line-chart.js';
import { formatDateTime } from '../format.js';
import { onLive } from '../live.js';
import type { Alert, Severity } from '../types.js';
import { useQuery } from '../use-query.js';

const pageSize = 25;
type SeverityFilter = 'all' | Severity;
type StateFilter = 'all' | 'open' | 'acknowledged';

/** The cohort a QoS alert names (docs/alerts.md "Naming the cause"), in words, or null. */
function cohortWords(data: Record<string, unknown>): string | null {
  const c = data.cohort as Record<string, unknown> | null | undefined;
  if (!c || typeof c.dimension !== 'string' || typeof c.value !== 'string') return null;
  const m = cohortMeasure(c);
  const share = typeof c.share === 'number' ? `${Math.round(c.share * 100)} % of it` : '';
  const moved = m ? `${m.now}${m.unit}${m.what && ` ${m.what}`} against ${m.before}${m.unit} before` : '';
  const name = `${c.dimension.replace('_', ' ')} ${c.value}`;
  const facts = [share, moved].filter(Boolean).join(', ');
  return facts ? `${name}: ${facts}` : name;
}

/** The metric per minute around the alert's start (`data.series`), as chart points. */
function seriesPoints(data: Record<string, unknown>): { points: Point[]; unit: string } | null {
  const s = data.series as { start?: unknown; step_seconds?: unknown; unit?: unknown; values?: unknown } | undefined;
  if (!s || typeof s.start !== 'string' || typeof s.step_seconds !== 'number' || !Array.isArray(s.values)) return null;
  const start = Date.parse(s.start) / 1000;
  const points = s.values.flatMap((v: unknown, i) =>
    typeof v === 'number' ? [{ t: start + i * (s.step_seconds as number), value: v }] : [],
  );
  return points.length > 1 ? { points, unit: typeof s.unit === 'string' ? s.unit : '' } : null;
}

function matches(a: Alert, severity: SeverityFilter, state: StateFilter): boolean {
  return (
    (severity === 'all' || a.severity === severity) &&
    (state === 'all' || (state === 'acknowledged') === a.acknowledged)
  );
}

function AlertFacts({ a }: { a: Alert }) {
  const cohort = cohortWords(a.data);
  const series = seriesPoints(a.data);
  if (!cohort && !series) return null;
  return (
    <div class="alert-facts">
      {cohort && (
        <p class="alert-cohort">
          <strong>Cohort</strong> {cohort}
        </p>
      )}
      {series && (
        <LineChart
          points={series.points}
          label={`The metric per minute (${series.unit}) up to the alert, from ${formatDateTime(new Date(series.points[0]!.t * 1000).toISOString())}`}
          height={120}
        />
      )}
    </div>
  );
}

export function AlertsPage() {
  const [severity, setSeverity] = useState<SeverityFilter>('all');
  const [state, setState] = useState<StateFilter>('all');
  const [offset, setOffset] = useState(0);
  const [fresh, setFresh] = useState<Alert[]>([]);
  const [changed, setChanged] = useState<Record<number, Alert>>({});
  const [busy, setBusy] = useState<number | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const query = new URLSearchParams({ limit: String(pageSize), offset: String(offset) });
  if (severity !== 'all') query.set('severity', severity);
  if (state !== 'all') query.set('acknowledged', String(state === 'acknowledged'));
  const list = useQuery(() => api<Alert[]>('GET', `/v1/analytics/alerts?${query}`), query.toString(), 30_000);

  // A pushed alert stays on top until the list has it: the store may see it a moment after the live feed does.
  useEffect(() => setFresh((old) => old.filter((a) => !list.data?.data.some((l) => l.id === a.id))), [list.data]);
  // Alerts pushed by the live feed join the top of the first page as they fire.
  useEffect(
    () =>
      onLive((m) => {
        if (m.type !== 'alert') return;
        const { type: _type, ...alert } = m;
        setFresh((old) => [alert, ...old.filter((a) => a.id !== alert.id)]);
      }),
    [],
  );

  const listed = list.data?.data ?? [];
  const shown = [
    ...(offset === 0 ? fresh.filter((a) => matches(a, severity, state) && !listed.some((l) => l.id === a.id)) : []),
    ...listed,
  ].map((a) => changed[a.id] ?? a);
  const acknowledge = async (a: Alert): Promise<void> => {
    setBusy(a.id);
    setError(null);
    try {
      const { data } = await api<Alert>('POST', `/v1/alerts/${a.id}/acknowledge`);
      setChanged((c) => ({ ...c, [a.id]: data }));
    } catch (err) {
      if (err instanceof ApiError) setError(err);
    } finally {
      setBusy(null);
    }
  };
  const newest = fresh[0];
  return (
    <>
      <div class="page-head">
        <h1>Alerts</h1>
        <div class="filters">
          <SelectField<SeverityFilter>
            label="Severity"
            value={severity}
            onChange={(v) => {
              setSeverity(v);
              setOffset(0);
            }}
            options={[
              ['all', 'All'],
              ['critical', 'Critical'],
              ['warning', 'Warning'],
              ['info', 'Info'],
            ]}
          />
          <SelectField<StateFilter>
            label="Status"
            value={state}
            onChange={(v) => {
              setState(v);
              setOffset(0);
            }}
            options={[
              ['all', 'All'],
              ['open', 'Not acknowledged'],
              ['acknowledged', 'Acknowledged'],
            ]}
          />
        </div>
      </div>
      {newest && <Notice kind="info">New alert: {newest.title}</Notice>}
      <ErrorNotice error={list.error ?? error} />
      <ul class="alerts" aria-label="Alerts, newest first" aria-busy={list.loading && !list.data}>
        {shown.length === 0 && !list.loading && <li class="empty">No alerts match these filters.</li>}
        {shown.map((a) => (
          <li key={a.id} class={`alert alert-${a.severity}`} data-alert-id={a.id}>
            <div class="alert-head">
              <Badge tone={a.severity}>{a.severity}</Badge>
              <h3>{a.title}</h3>
            </div>
            <p>{a.description}</p>
            <AlertFacts a={a} />
            <div class="alert-meta muted">
              <span>{a.category}</span>
              <span>raised {formatDateTime(a.created_at)}</span>
              {a.resolved_at && <span>resolved {formatDateTime(a.resolved_at)}</span>}
              {a.acknowledged && <span>acknowledged {formatDateTime(a.acknowledged_at)}</span>}
            </div>
            {!a.acknowledged && can('alerts:write') && (
              <Button
                variant="secondary"
                busy={busy === a.id}
                onClick={() => void acknowledge(a)}
                aria-label={`Acknowledge: ${a.title}`}
              >
                Acknowledge
              </Button>
            )}
          </li>
        ))}
      </ul>
      <Pager label="Alerts" offset={offset} limit={pageSize} total={list.data?.total ?? 0} onChange={setOffset} />
    </>
  );
}
