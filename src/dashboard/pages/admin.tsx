import { useState } from 'preact/hooks';
import { can, session } from '../api.js';
import { ApiKeysPanel } from '../admin/api-keys.js';
import { ExportsPanel } from '../admin/exports.js';
import { ServiceAccountsPanel } from '../admin/service-accounts.js';
import { WebhooksPanel } from '../admin/webhooks.js';
import { Notice } from '../components/notice.js';
import { Tabs } from '../components/tabs.js';

// Each panel is shown to the roles whose scopes its endpoints need (docs/api.md).
const panels = [
  { id: 'keys', label: 'API keys', scope: 'keys:manage', Panel: ApiKeysPanel },
  { id: 'webhooks', label: 'Webhooks', scope: 'settings:write', Panel: WebhooksPanel },
  { id: 'service-accounts', label: 'Service accounts', scope: 'settings:write', Panel: ServiceAccountsPanel },
  { id: 'exports', label: 'Exports', scope: 'analytics:read', Panel: ExportsPanel },
] as const;

export function AdminPage() {
  const allowed = panels.filter((p) => can(p.scope));
  const [active, setActive] = useState<string>(allowed[0]?.id ?? '');
  const current = allowed.find((p) => p.id === active) ?? allowed[0];
  return (
    <>
      <div class="page-head">
        <h1>Admin</h1>
      </div>
      {!current ? (
        <Notice kind="info">Your role ({session.value?.role}) has no settings to manage.</Notice>
      ) : (
        <Tabs label="Settings" tabs={allowed} active={current.id} onChange={setActive}>
          <div class="grid">
            <current.Panel />
          </div>
        </Tabs>
      )}
    </>
  );
}
