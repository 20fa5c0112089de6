import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { Button } from '../components/button.js';
import { Badge, Card } from '../components/card.js';
import { TextField } from '../components/field.js';
import { ErrorNotice } from '../components/notice.js';
import { DataTable } from '../components/table.js';
import { formatDateTime, formatInt } from '../format.js';
import type { Export } from '../types.js';
import { useAction } from '../use-action.js';

const day = 86_400_000;
/** The UTC day of `ms`, as exports count days (docs/export.md). */
const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** Raw event exports (enterprise). The API lists no exports, so this page follows the ones requested here. */
export function ExportsPanel() {
  const [from, setFrom] = useState(utcDay(Date.now() - day));
  const [to, setTo] = useState(utcDay(Date.now()));
  const [types, setTypes] = useState('');
  const [exports, setExports] = useState<Export[]>([]);
  const action = useAction();
  const pending = exports.some((e) => e.status === 'pending');
  useEffect(() => {
    if (!pending) return undefined;
    const timer = setInterval(() => {
      const asked = exports.filter((e) => e.status === 'pending');
      void Promise.all(
        asked.map((e) =>
          api<Export>('GET', `/v1/analytics/export/${encodeURIComponent(e.export_id)}`).then(
            (r) => r.data,
            () => e,
          ),
        ),
      ).then((now) => {
        const byId = new Map(now.map((e) => [e.export_id, e]));
        // Merged into the list as it is by then: an export requested meanwhile stays.
        setExports((list) => list.map((e) => byId.get(e.export_id) ?? e));
      });
    }, 2000);
    return () => clearInterval(timer);
  }, [pending, exports]);
  const request = async (e: Event): Promise<void> => {
    e.preventDefault();
    const eventTypes = types
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const body = { from, to, ...(eventTypes.length ? { event_types: eventTypes } : {}) };
    const r = await action.run('request', async () => {
      const created = await api<{ export_id: string }>('POST', '/v1/analytics/export', body);
      return api<Export>('GET', `/v1/analytics/export/${encodeURIComponent(created.data.export_id)}`);
    });
    if (r) setExports((old) => [r.data, ...old]);
  };
  return (
    <>
      <Card title="Export raw events">
        <p class="muted">
          Every accepted event of the chosen UTC days (31 at most), as a Parquet file (enterprise plans).
        </p>
        <form class="inline-form" onSubmit={(e) => void request(e)}>
          <TextField
            label="From (UTC day)"
            type="date"
            required
            value={from}
            onInput={(e) => setFrom(e.currentTarget.value)}
          />
          <TextField
            label="To (UTC day, included)"
            type="date"
            required
            value={to}
            onInput={(e) => setTo(e.currentTarget.value)}
          />
          <TextField
            label="Event types"
            value={types}
            onInput={(e) => setTypes(e.currentTarget.value)}
            placeholder="all, or play_start, heartbeat"
          />
          <Button variant="primary" type="submit" busy={action.busy === 'request'}>
            Request export
          </Button>
        </form>
        <ErrorNotice error={action.error} />
      </Card>
      <Card title="Requested here" wide>
        <DataTable
          caption="Exports requested in this session"
          rows={exports}
          rowKey={(e) => e.export_id}
          empty="No exports requested in this session."
          columns={[
            { header: 'Requested', cell: (e) => formatDateTime(e.created_at) },
            { header: 'Days (UTC)', cell: (e) => (e.from === e.to ? e.from : `${e.from} – ${e.to}`) },
            {
              header: 'Status',
              cell: (e) => (
                <Badge tone={e.status === 'ready' ? 'ok' : e.status === 'failed' ? 'critical' : 'muted'}>
                  {e.status}
                </Badge>
              ),
            },
            { header: 'Rows', numeric: true, cell: (e) => (e.rows === null ? '—' : formatInt(e.rows)) },
            {
              header: 'File',
              cell: (e) =>
                e.url ? (
                  <a href={e.url} download>
                    Download Parquet
                  </a>
                ) : (
                  (e.error ?? '—')
                ),
            },
          ]}
        />
      </Card>
    </>
  );
}
