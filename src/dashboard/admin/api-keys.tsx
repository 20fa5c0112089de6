import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { Button } from '../components/button.js';
import { Card } from '../components/card.js';
import { RevokeStatus } from '../components/revoke-status.js';
import { SecretOnce } from '../components/copy-button.js';
import { SelectField, TextField } from '../components/field.js';
import { ErrorNotice } from '../components/notice.js';
import { DataTable } from '../components/table.js';
import { formatDateTime } from '../format.js';
import type { ApiKey, ApiKeyCreated, Environment } from '../types.js';
import { useAction } from '../use-action.js';
import { useQuery } from '../use-query.js';

export function ApiKeysPanel() {
  const keys = useQuery(() => api<ApiKey[]>('GET', '/v1/api-keys'), 'keys');
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState<Environment>('production');
  const [created, setCreated] = useState<ApiKeyCreated | null>(null);
  const action = useAction();
  const create = async (e: Event): Promise<void> => {
    e.preventDefault();
    const r = await action.run('create', () =>
      api<ApiKeyCreated>('POST', '/v1/api-keys', { name: name.trim(), environment }),
    );
    if (!r) return;
    setCreated(r.data);
    setName('');
    keys.reload();
  };
  const revoke = async (k: ApiKey): Promise<void> => {
    if (await action.run(k.id, () => api('DELETE', `/v1/api-keys/${encodeURIComponent(k.id)}`))) keys.reload();
  };
  return (
    <>
      <Card title="Create an ingest key">
        <form class="inline-form" onSubmit={(e) => void create(e)}>
          <TextField
            label="Name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            placeholder="Android app"
          />
          <SelectField<Environment>
            label="Environment"
            value={environment}
            onChange={setEnvironment}
            options={[
              ['production', 'Production'],
              ['staging', 'Staging'],
              ['development', 'Development'],
            ]}
          />
          <Button variant="primary" type="submit" busy={action.busy === 'create'}>
            Create key
          </Button>
        </form>
        {created && <SecretOnce label={`API key “${created.name}”`} secret={created.key} />}
      </Card>
      <Card title="Keys" wide>
        <ErrorNotice error={keys.error ?? action.error} />
        <DataTable
          caption="API keys"
          rows={keys.data?.data ?? []}
          rowKey={(k) => k.id}
          empty="No keys yet."
          columns={[
            { header: 'Name', cell: (k) => k.name },
            { header: 'Environment', cell: (k) => k.environment },
            { header: 'Key', cell: (k) => <code>{k.prefix}…</code> },
            { header: 'Created', cell: (k) => formatDateTime(k.created_at) },
            { header: 'Last used', cell: (k) => formatDateTime(k.last_used_at) },
            {
              header: 'Status',
              cell: (k) => (
                <RevokeStatus
                  name={k.name}
                  revokedAt={k.revoked_at}
                  busy={action.busy === k.id}
                  onRevoke={() => void revoke(k)}
                />
              ),
            },
          ]}
        />
      </Card>
    </>
  );
}
