import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { Button, ConfirmButton } from '../components/button.js';
import { Badge, Card } from '../components/card.js';
import { SecretOnce } from '../components/copy-button.js';
import { CheckboxGroup, SelectField, TextField } from '../components/field.js';
import { ErrorNotice, Notice } from '../components/notice.js';
import { DataTable } from '../components/table.js';
import { formatDateTime, formatMs } from '../format.js';
import { webhookCategories, type Webhook, type WebhookAttempt } from '../types.js';
import { useAction } from '../use-action.js';
import { useQuery } from '../use-query.js';

type Format = 'json' | 'slack';

function CreateWebhook({ onCreated }: { onCreated: () => void }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [format, setFormat] = useState<Format>('json');
  const [categories, setCategories] = useState<Set<string>>(
    new Set(['qos.rebuffer_spike', 'qos.startup_regression', 'qos.error_spike']),
  );
  const [secret, setSecret] = useState<string | null>(null);
  const action = useAction();
  const create = async (e: Event): Promise<void> => {
    e.preventDefault();
    const body = {
      url: url.trim(),
      categories: [...categories],
      format,
      ...(description.trim() ? { description: description.trim() } : {}),
    };
    const r = await action.run('create', () => api<{ secret: string }>('POST', '/v1/webhooks', body));
    if (!r) return;
    setSecret(r.data.secret);
    setUrl('');
    setDescription('');
    onCreated();
  };
  return (
    <Card title="Add an endpoint">
      <form class="stack" onSubmit={(e) => void create(e)}>
        <TextField
          label="URL"
          type="url"
          required
          maxLength={2048}
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          placeholder="https://hooks.slack.com/services/…"
          hint="A hooks.slack.com URL always gets Slack messages."
        />
        <TextField
          label="Description"
          maxLength={500}
          value={description}
          onInput={(e) => setDescription(e.currentTarget.value)}
        />
        <SelectField<Format>
          label="Format"
          value={format}
          onChange={setFormat}
          options={[
            ['json', 'JSON (signed)'],
            ['slack', 'Slack message'],
          ]}
        />
        <CheckboxGroup legend="Categories" options={webhookCategories} selected={categories} onChange={setCategories} />
        <ErrorNotice error={action.error} />
        <Button variant="primary" type="submit" busy={action.busy === 'create'} disabled={categories.size === 0}>
          Add endpoint
        </Button>
      </form>
      {secret && <SecretOnce label="Signing secret" secret={secret} />}
    </Card>
  );
}

function Deliveries({ hook }: { hook: Webhook }) {
  const log = useQuery(
    () => api<WebhookAttempt[]>('GET', `/v1/webhooks/${encodeURIComponent(hook.id)}/deliveries?limit=200`),
    hook.id,
    5000,
  );
  const action = useAction();
  const [sent, setSent] = useState<string | null>(null);
  const replay = async (a: WebhookAttempt): Promise<void> => {
    const r = await action.run(a.id, () =>
      api<{ delivery_id: string }>(
        'POST',
        `/v1/webhooks/${encodeURIComponent(hook.id)}/deliveries/${encodeURIComponent(a.id)}/replay`,
      ),
    );
    if (r) {
      setSent(`Replay of ${r.data.delivery_id} queued.`);
      log.reload();
    }
  };
  return (
    <div class="deliveries">
      <h3>Deliveries to {hook.url}</h3>
      {sent && <Notice kind="success">{sent}</Notice>}
      <ErrorNotice error={log.error ?? action.error} />
      <DataTable
        caption={`Last 200 delivery attempts to ${hook.url}`}
        rows={log.data?.data ?? []}
        rowKey={(a) => a.id}
        empty="Nothing sent yet. Send a test ping."
        columns={[
          { header: 'Time', cell: (a) => formatDateTime(a.created_at) },
          { header: 'Event', cell: (a) => a.type },
          { header: 'Attempt', numeric: true, cell: (a) => String(a.attempt) },
          {
            header: 'Status',
            cell: (a) => (
              <Badge tone={a.status === 'succeeded' ? 'ok' : a.status === 'failed' ? 'critical' : 'muted'}>
                {a.status}
              </Badge>
            ),
          },
          {
            header: 'Response',
            numeric: true,
            cell: (a) => (a.response_code === null ? (a.error ?? '—') : String(a.response_code)),
          },
          { header: 'Latency', numeric: true, cell: (a) => (a.latency_ms === null ? '—' : formatMs(a.latency_ms)) },
          {
            header: 'Request body',
            cell: (a) => (
              <details>
                <summary>Show</summary>
                <pre class="body">{pretty(a.request_body)}</pre>
              </details>
            ),
          },
          {
            header: 'Replay',
            cell: (a) => (
              <Button
                variant="quiet"
                busy={action.busy === a.id}
                onClick={() => void replay(a)}
                aria-label={`Replay ${a.type} attempt ${a.attempt}`}
              >
                Replay
              </Button>
            ),
          },
        ]}
      />
    </div>
  );
}

function pretty(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

export function WebhooksPanel() {
  const hooks = useQuery(() => api<Webhook[]>('GET', '/v1/webhooks?limit=200'), 'hooks');
  const [open, setOpen] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const action = useAction();
  const act = async (h: Webhook, name: string, f: () => Promise<unknown>, done?: string): Promise<void> => {
    setMessage(null);
    if ((await action.run(`${h.id}:${name}`, f)) !== undefined) {
      if (done) setMessage(done);
      hooks.reload();
    }
  };
  const path = (h: Webhook, rest = ''): string => `/v1/webhooks/${encodeURIComponent(h.id)}${rest}`;
  const list = hooks.data?.data ?? [];
  const opened = list.find((h) => h.id === open);
  return (
    <>
      <CreateWebhook onCreated={hooks.reload} />
      <Card title="Endpoints" wide>
        {message && <Notice kind="success">{message}</Notice>}
        <ErrorNotice error={hooks.error ?? action.error} />
        <DataTable
          caption="Webhook endpoints"
          rows={list}
          rowKey={(h) => h.id}
          empty="No endpoints yet."
          columns={[
            { header: 'URL', cell: (h) => <span class="url">{h.url}</span> },
            { header: 'Format', cell: (h) => h.format },
            { header: 'Categories', cell: (h) => <span title={h.categories.join(', ')}>{h.categories.length}</span> },
            {
              header: 'State',
              cell: (h) =>
                h.enabled ? (
                  <Badge tone="ok">enabled</Badge>
                ) : (
                  <Badge tone="warning">disabled {formatDateTime(h.disabled_at)}</Badge>
                ),
            },
            {
              header: 'Actions',
              cell: (h) => (
                <div class="row-actions">
                  <Button
                    variant="quiet"
                    aria-expanded={open === h.id}
                    onClick={() => setOpen(open === h.id ? null : h.id)}
                    aria-label={`Deliveries of ${h.url}`}
                  >
                    Deliveries
                  </Button>
                  <Button
                    variant="quiet"
                    busy={action.busy === `${h.id}:test`}
                    onClick={() => void act(h, 'test', () => api('POST', path(h, '/test')), 'Test ping queued.')}
                    aria-label={`Send a test ping to ${h.url}`}
                  >
                    Test ping
                  </Button>
                  <Button
                    variant="quiet"
                    busy={action.busy === `${h.id}:enable`}
                    onClick={() => void act(h, 'enable', () => api('PATCH', path(h), { enabled: !h.enabled }))}
                    aria-label={`${h.enabled ? 'Disable' : 'Enable'} ${h.url}`}
                  >
                    {h.enabled ? 'Disable' : 'Enable'}
                  </Button>
                  <Button
                    variant="quiet"
                    busy={action.busy === `${h.id}:rotate`}
                    onClick={() =>
                      void action
                        .run(`${h.id}:rotate`, () => api<{ secret: string }>('POST', path(h, '/rotate-secret')))
                        .then((r) => r && setSecret({ id: h.id, secret: r.data.secret }))
                    }
                    aria-label={`Rotate the secret of ${h.url}`}
                  >
                    Rotate secret
                  </Button>
                  <ConfirmButton
                    label="Delete"
                    confirmLabel="Delete endpoint"
                    busy={action.busy === `${h.id}:delete`}
                    onConfirm={() => void act(h, 'delete', () => api('DELETE', path(h)), 'Endpoint deleted.')}
                  />
                </div>
              ),
            },
          ]}
        />
        {secret && list.some((h) => h.id === secret.id) && (
          <SecretOnce label="New signing secret (the old one keeps signing for 24 hours)" secret={secret.secret} />
        )}
        {opened && <Deliveries hook={opened} />}
      </Card>
    </>
  );
}
