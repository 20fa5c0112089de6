import { randomBytes } from 'node:crypto';
import type { Bus } from '../bus/bus.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { WebhookRecord } from '../control/records.js';
import { replyError } from '../http/server.js';
import type { HttpReply, HttpRequest, Route } from '../http/types.js';
import { deliveryId, newEventId, publishWebhookEvent } from '../contracts/webhook-events.js';
import { purgeLog, readLog } from '../contracts/webhook-log.js';
import type { DeliveryMessage } from '../contracts/webhook-streams.js';
import type { AddressGuard } from '../http/ssrf.js';
import { guarded, type Authenticator } from './auth.js';
import { controlReply, page, readJson } from './body.js';
import { limitParam, offsetParam, parseParams } from './params.js';
import type { Principal } from './tokens.js';

export interface WebhookRouteDeps {
  auth: Authenticator;
  control: ControlPlane;
  bus: Bus;
  /** The webhooks role's SSRF guard (the same WEBHOOK_ALLOW_HOSTS), asked already when a URL is set. */
  guard: AddressGuard;
}

/** Why a webhook URL may not be set: its host is, or resolves only to, an address the guard refuses. */
async function refusedUrl(guard: AddressGuard, url: string | undefined): Promise<string | null> {
  if (url === undefined || !URL.canParse(url)) return null; // the control plane words a malformed URL
  return guard.refusalOf(new URL(url).hostname);
}

/** An endpoint as the API shows it: never its secrets, which only creation and rotation answer. */
export function webhookView(r: WebhookRecord): Record<string, unknown> {
  const { id, url, categories, format, enabled, description, created_at, updated_at, disabled_at } = r;
  return { id, url, categories, format, enabled, description, created_at, updated_at, disabled_at };
}

/** Webhook endpoint management (CONTRACT §4): settings:write, always within the token's tenant. */
export function webhookRoutes({ auth, control, bus, guard }: WebhookRouteDeps): Route[] {
  const owned = (handler: (req: HttpRequest, who: Principal) => Promise<HttpReply>) =>
    guarded(auth, 'settings:write', (req, who) => controlReply(req, () => handler(req, who)));
  const id = (req: HttpRequest): string => req.params.id ?? '';
  return [
    {
      method: 'POST',
      path: '/v1/webhooks',
      handler: owned(async (req, who) => {
        const body = await readJson(req, {
          url: { type: 'string', required: true },
          categories: { type: 'string[]', required: true },
          description: { type: 'string', required: false },
          format: { type: 'string', required: false },
        });
        if (!body.ok) return body.error;
        const refused = await refusedUrl(guard, body.value.url);
        if (refused) return replyError(req, 'invalid_request', `url: ${refused}`);
        const r = await control.createWebhook(who.tenant, body.value);
        return {
          status: 201,
          headers: { 'Cache-Control': 'no-store' },
          body: {
            id: r.id,
            url: r.url,
            categories: r.categories,
            format: r.format,
            enabled: r.enabled,
            secret: r.secret,
            created_at: r.created_at,
          },
        };
      }),
    },
    {
      method: 'GET',
      path: '/v1/webhooks',
      handler: owned(async (_req, who) => page((await control.webhooks.list(who.tenant)).map(webhookView))),
    },
    {
      method: 'GET',
      path: '/v1/webhooks/{id}',
      handler: owned(async (req, who) => ({
        status: 200,
        body: webhookView(await control.webhooks.get(who.tenant, id(req))),
      })),
    },
    {
      method: 'PATCH',
      path: '/v1/webhooks/{id}',
      handler: owned(async (req, who) => {
        const body = await readJson(req, {
          url: { type: 'string', required: false },
          categories: { type: 'string[]', required: false },
          description: { type: 'string', required: false },
          enabled: { type: 'boolean', required: false },
        });
        if (!body.ok) return body.error;
        const refused = await refusedUrl(guard, body.value.url);
        if (refused) return replyError(req, 'invalid_request', `url: ${refused}`);
        return { status: 200, body: webhookView(await control.webhooks.update(who.tenant, id(req), body.value)) };
      }),
    },
    {
      method: 'DELETE',
      path: '/v1/webhooks/{id}',
      handler: owned(async (req, who) => {
        const deleted = await control.webhooks.delete(who.tenant, id(req));
        // Its held deliveries are dropped by the webhooks role, which sees the endpoint gone.
        await purgeLog(bus, deleted.id);
        return { status: 200, body: deleted };
      }),
    },
    {
      method: 'POST',
      path: '/v1/webhooks/{id}/rotate-secret',
      handler: owned(async (req, who) => {
        const r = await control.webhooks.rotateSecret(who.tenant, id(req));
        return {
          status: 200,
          headers: { 'Cache-Control': 'no-store' },
          body: { secret: r.secret, previous_secret_expires_at: r.previous_secret_until },
        };
      }),
    },
    {
      method: 'GET',
      path: '/v1/webhooks/{id}/deliveries',
      handler: owned(async (req, who) => {
        const parsed = parseParams(req.query, { limit: limitParam, offset: offsetParam });
        if (!parsed.ok)
          return replyError(req, 'invalid_parameter', parsed.error.message, [{ parameter: parsed.error.parameter }]);
        const endpoint = await control.webhooks.get(who.tenant, id(req));
        return page(await readLog(bus, endpoint.id), parsed.value.limit, parsed.value.offset);
      }),
    },
    {
      method: 'POST',
      path: '/v1/webhooks/{id}/deliveries/{delivery_id}/replay',
      handler: owned(async (req, who) => {
        const endpoint = await control.webhooks.get(who.tenant, id(req));
        const wanted = req.params.delivery_id ?? '';
        // A delivery id (its newest attempt) or the id of one logged attempt.
        const attempt = (await readLog(bus, endpoint.id)).find((a) => a.delivery_id === wanted || a.id === wanted);
        if (!attempt)
          return replyError(req, 'not_found', `delivery ${JSON.stringify(wanted)} is not in the log of ${endpoint.id}`);
        const msg: DeliveryMessage = {
          delivery_id: attempt.delivery_id,
          endpoint_id: endpoint.id,
          tenant: endpoint.tenant,
          event_id: attempt.event_id,
          type: attempt.type,
          body: attempt.request_body,
          attempt: 1,
          not_before: null,
        };
        await bus.js.publish(bus.names.webhookDeliverySubject('new', endpoint.id), JSON.stringify(msg), {
          msgID: `${attempt.delivery_id}:replay:${randomBytes(6).toString('hex')}`,
        });
        return { status: 202, body: { delivery_id: attempt.delivery_id, event_id: attempt.event_id } };
      }),
    },
    {
      method: 'POST',
      path: '/v1/webhooks/{id}/test',
      handler: owned(async (req, who) => {
        const endpoint = await control.webhooks.get(who.tenant, id(req));
        const event = {
          id: newEventId(),
          type: 'test.ping',
          created_at: new Date().toISOString(),
          tenant_slug: who.tenant,
          data: {
            message: 'A test event from Darshak: this endpoint receives and verifies webhooks.',
            endpoint_id: endpoint.id,
          },
        };
        await publishWebhookEvent(bus, event, endpoint.id);
        return { status: 202, body: { event_id: event.id, delivery_id: deliveryId(event.id, endpoint.id) } };
      }),
    },
  ];
}
