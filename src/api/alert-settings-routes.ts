import { checkOverrides, effective, loadThresholds, type Thresholds } from '../metric/thresholds.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { TenantRecord } from '../control/records.js';
import type { Route } from '../http/types.js';
import { guarded, type Authenticator } from './auth.js';
import { controlReply, readJson } from './body.js';

/** A tenant's alert thresholds: config/alerts.json, the tenant's overrides, and what applies (docs/alerts.md). */
function settingsView(defaults: Thresholds, t: TenantRecord | null): Record<string, unknown> {
  const overrides = t?.alert_thresholds ?? {};
  return {
    defaults,
    overrides,
    effective: Object.fromEntries(Object.keys(defaults).map((c) => [c, effective(defaults, overrides, c)])),
  };
}

/** GET and PUT /v1/alert-thresholds (settings:write): the owner's side of `darshak tenant update --alert-thresholds`. */
export function alertSettingsRoutes({ auth, control }: { auth: Authenticator; control: ControlPlane }): Route[] {
  const defaults = loadThresholds();
  return [
    {
      method: 'GET',
      path: '/v1/alert-thresholds',
      handler: guarded(auth, 'settings:write', async (_req, who) => ({
        status: 200,
        body: settingsView(defaults, await control.getTenant(who.tenant)),
      })),
    },
    {
      method: 'PUT',
      path: '/v1/alert-thresholds',
      handler: guarded(auth, 'settings:write', (req, who) =>
        controlReply(req, async () => {
          const body = await readJson(req, { overrides: { type: 'object', required: true } });
          if (!body.ok) return body.error;
          const overrides =
            Object.keys(body.value.overrides).length === 0 ? null : (body.value.overrides as Thresholds);
          checkOverrides(overrides);
          return {
            status: 200,
            body: settingsView(defaults, await control.updateTenant(who.tenant, { alert_thresholds: overrides })),
          };
        }),
      ),
    },
  ];
}
