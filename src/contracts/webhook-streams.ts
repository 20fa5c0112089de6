import { DiscardPolicy, RetentionPolicy, StorageType, type StreamConfig } from 'nats';
import { nanos, type Bus } from '../bus/bus.js';

const hour = 3_600_000;

/** One attempt to make: a message of the deliveries stream (or, held, of the held stream). */
export interface DeliveryMessage {
  delivery_id: string;
  endpoint_id: string;
  tenant: string;
  event_id: string;
  type: string;
  /** The exact bytes to send and sign, fixed at fan-out so every retry and replay sends the same. */
  body: string;
  /** 1-based number of this attempt in its schedule. */
  attempt: number;
  /** Not before this time (ms, by the service's clock); null: now. */
  not_before: number | null;
}

/** The last attempts kept per endpoint (the seed's delivery log). */
export const logPerEndpoint = 200;

/**
 * The webhook streams: events to fan out, deliveries to make (a work queue: new and retry subjects), deliveries held
 * for disabled endpoints, and the per-endpoint log. Idempotent: every process that publishes or reads calls it.
 */
export async function ensureWebhookStreams(bus: Bus): Promise<void> {
  const n = bus.names;
  const base = { storage: StorageType.File, discard: DiscardPolicy.Old };
  const streams: Array<Partial<StreamConfig> & { name: string }> = [
    // Duplicate window: an alert republished within an hour (same event id) is fanned out once.
    {
      ...base,
      name: n.webhookEventsStream,
      subjects: [n.webhookEventsWildcard],
      retention: RetentionPolicy.Limits,
      max_age: nanos(7 * 24 * hour),
      duplicate_window: nanos(hour),
    },
    // 30 days: the whole retry schedule (about 31 h) with room for held deliveries that are released late.
    {
      ...base,
      name: n.webhookDeliveriesStream,
      subjects: [n.webhookDeliveryWildcard('new'), n.webhookDeliveryWildcard('retry')],
      retention: RetentionPolicy.Workqueue,
      max_age: nanos(30 * 24 * hour),
      duplicate_window: nanos(10 * 60_000),
    },
    {
      ...base,
      name: n.webhookHeldStream,
      subjects: [n.webhookHeldWildcard],
      retention: RetentionPolicy.Limits,
      max_age: nanos(30 * 24 * hour),
    },
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
