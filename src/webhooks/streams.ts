import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type ConsumerConfig, type StreamConfig } from 'nats';
import type { Bus } from '../bus/bus.js';

const nanos = (ms: number): number => ms * 1_000_000;
const hour = 3_600_000;

/** The last attempts kept per endpoint (the seed's delivery log). */
export const logPerEndpoint = 200;

/**
 * Parked retries are pending on the retry consumer (a `nak(delay)` keeps a message unacknowledged), so its
 * max_ack_pending bounds how many deliveries may be waiting for their next attempt at once; the new-delivery
 * consumer's smaller bound is only the work in flight and is never taken up by parked messages.
 */
export const retryMaxAckPending = 200_000;
export const newMaxAckPending = 1_000;

/**
 * The webhook streams: events to fan out, deliveries to make (a work queue: new and retry subjects), deliveries held
 * for disabled endpoints, and the per-endpoint log. Idempotent: every process that publishes or reads calls it.
 */
export async function ensureWebhookStreams(bus: Bus): Promise<void> {
  const n = bus.names;
  const base = { storage: StorageType.File, discard: DiscardPolicy.Old };
  const streams: Array<Partial<StreamConfig> & { name: string }> = [
    // Duplicate window: an alert republished within an hour (same event id) is fanned out once.
    { ...base, name: n.webhookEventsStream, subjects: [n.webhookEventsWildcard], retention: RetentionPolicy.Limits, max_age: nanos(7 * 24 * hour), duplicate_window: nanos(hour) },
    // 30 days: the whole retry schedule (about 31 h) with room for held deliveries that are released late.
    {
      ...base,
      name: n.webhookDeliveriesStream,
      subjects: [n.webhookDeliveryWildcard('new'), n.webhookDeliveryWildcard('retry')],
      retention: RetentionPolicy.Workqueue,
      max_age: nanos(30 * 24 * hour),
      duplicate_window: nanos(10 * 60_000),
    },
    { ...base, name: n.webhookHeldStream, subjects: [n.webhookHeldWildcard], retention: RetentionPolicy.Limits, max_age: nanos(30 * 24 * hour) },
    {
      ...base,
      name: n.webhookLogStream,
      subjects: [n.webhookLogWildcard],
      retention: RetentionPolicy.Limits,
      max_msgs_per_subject: logPerEndpoint,
      max_age: nanos(90 * 24 * hour),
      // An entry written again by the process after one that died (service.ts alreadyMade) is de-duplicated.
      duplicate_window: nanos(hour),
    },
  ];
  for (const config of streams) await bus.ensureStream(config);
}

/** The durable consumers of the webhooks role (shared by every webhooks process). */
export async function ensureWebhookConsumers(bus: Bus): Promise<void> {
  const n = bus.names;
  const explicit = { ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All };
  const ensure = (stream: string, config: Partial<ConsumerConfig> & { durable_name: string }): Promise<void> => bus.ensureConsumer(stream, config);
  await ensure(n.webhookEventsStream, { ...explicit, durable_name: 'webhooks-fanout', ack_wait: nanos(30_000), max_ack_pending: 1000 });
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
