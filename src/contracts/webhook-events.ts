import { createHash, randomBytes } from 'node:crypto';
import { headers as natsHeaders } from 'nats';
import type { Bus } from '../bus/bus.js';
import { ensureWebhookStreams } from './webhook-streams.js';

/** The seed's webhook delivery body. */
export interface WebhookEvent {
  id: string;
  type: string;
  created_at: string;
  tenant_slug: string;
  data: Record<string, unknown>;
}

/** Header of an event meant for one endpoint only (the test ping), whatever it subscribes to. */
export const targetHeader = 'Darshak-Webhook-Endpoint';

export const newEventId = (): string => `evt_${randomBytes(12).toString('hex')}`;

/** X-Service-Delivery: the same for every retry and replay of one (event, endpoint). */
export function deliveryId(eventId: string, endpointId: string): string {
  return `dlv_${createHash('sha256').update(`${eventId}\n${endpointId}`).digest('hex').slice(0, 24)}`;
}

const ready = new WeakSet<Bus>();

/**
 * Hand an event to the webhooks role (the alerts role and the test endpoint call this). The event id is the message
 * id, so publishing the same event again within an hour is not delivered twice. `endpointId` sends it to that
 * endpoint only.
 */
export async function publishWebhookEvent(bus: Bus, event: WebhookEvent, endpointId?: string): Promise<void> {
  if (!ready.has(bus)) {
    await ensureWebhookStreams(bus);
    ready.add(bus);
  }
  const h = natsHeaders();
  if (endpointId !== undefined) h.set(targetHeader, endpointId);
  await bus.js.publish(bus.names.webhookEventsSubject(event.tenant_slug), JSON.stringify(event), {
    msgID: event.id,
    headers: h,
  });
}
