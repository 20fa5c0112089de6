import { AckPolicy, DeliverPolicy, type ConsumerConfig } from 'nats';
import { nanos, type Bus } from '../bus/bus.js';

/**
 * Parked retries are pending on the retry consumer (a `nak(delay)` keeps a message unacknowledged), so its
 * max_ack_pending bounds how many deliveries may be waiting for their next attempt at once; the new-delivery
 * consumer's smaller bound is only the work in flight and is never taken up by parked messages.
 */
export const retryMaxAckPending = 200_000;
export const newMaxAckPending = 1_000;

/** The durable consumers of the webhooks role (shared by every webhooks process). */
export async function ensureWebhookConsumers(bus: Bus): Promise<void> {
  const n = bus.names;
  const explicit = { ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All };
  const ensure = (stream: string, config: Partial<ConsumerConfig> & { durable_name: string }): Promise<void> =>
    bus.ensureConsumer(stream, config);
  await ensure(n.webhookEventsStream, {
    ...explicit,
    durable_name: 'webhooks-fanout',
    ack_wait: nanos(30_000),
    max_ack_pending: 1000,
  });
  await ensure(n.webhookDeliveriesStream, {
    ...explicit,
    durable_name: 'webhooks-new',
    filter_subject: n.webhookDeliveryWildcard('new'),
    ack_wait: nanos(60_000),
    max_ack_pending: newMaxAckPending,
  });
  await ensure(n.webhookDeliveriesStream, {
    ...explicit,
    durable_name: 'webhooks-retry',
    filter_subject: n.webhookDeliveryWildcard('retry'),
    ack_wait: nanos(60_000),
    max_ack_pending: retryMaxAckPending,
  });
}
