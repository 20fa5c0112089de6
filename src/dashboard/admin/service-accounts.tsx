import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { Button } from '../components/button.js';
import { Card } from '../components/card.js';
import { RevokeStatus } from '../components/revoke-status.js';
import { SecretOnce } from '../components/copy-button.js';
import { CheckboxGroup, TextField } from '../components/field.js';
import { ErrorNotice } from '../components/notice.js';
import { DataTable } from '../components/table.js';
import { formatDateTime } from '../format.js';
import type { ServiceAccount } from '../types.js';
import { useAction } from '../use-action.js';
import { useQuery } from '../use-query.js';

const scopes = ['analytics:read', 'alerts:write', 'keys:manage'] as const;

export function ServiceAccountsPanel() {
  const accounts = useQuery(() => api<ServiceAccount[]>('GET', '/v1/service-accounts'), 'accounts');
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<Set<string>>(new Set(['analytics:read']));
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const action = useAction();
  const create = async (e: Event): Promise<void> => {
    e.preventDefault();
    const r = await action.run('create', () =>
      api<ServiceAccount & { token: string }>('POST', '/v1/service-accounts', {
        name: name.trim(),
        scopes: [...chosen],
      }),
    );
    if (!r) return;
    setCreated({ name: r.data.name, token: r.data.token });
    setName('');
    accounts.reload();
  };
  return (
    <>
      <Card title="Create a service account">
        <p class="muted">A token for scripts and BI tools, valid 90 days. It can never change settings.</p>
        <form class="stack" onSubmit={(e) => void create(e)}>
          <TextField
            label="Name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            placeholder="Nightly report"
          />
          <CheckboxGroup legend="Scopes" options={scopes} selected={chosen} onChange={setChosen} />
          <Button variant="primary" type="submit" busy={action.busy === 'create'} disabled={chosen.size === 0}>
            Create service account
          </Button>
        </form>
        {created && <SecretOnce label={`Token for “${created.name}”`} secret={created.token} />}
      </Card>
      <Card title="Service accounts" wide>
        <ErrorNotice error={accounts.error ?? action.error} />
        <DataTable
          caption="Service accounts"
          rows={accounts.data?.data ?? []}
          rowKey={(a) => a.id}
          empty="No service accounts yet."
          columns={[
            { header: 'Name', cell: (a) => a.name },
            { header: 'Scopes', cell: (a) => a.scopes.join(', ') },
            { header: 'Created', cell: (a) => formatDateTime(a.created_at) },
            { header: 'Expires', cell: (a) => formatDateTime(a.expires_at) },
            {
              header: 'Status',
              cell: (a) => (
                <RevokeStatus
                  name={a.name}
                  revokedAt={a.revoked_at}
                  busy={action.busy === a.id}
                  onRevoke={() =>
                    void action
                      .run(a.id, () => api('DELETE', `/v1/service-accounts/${encodeURIComponent(a.id)}`))
                      .then((r) => r && accounts.reload())
                  }
                />
              ),
            },
          ]}
        />
      </Card>
    </>
  );
}
