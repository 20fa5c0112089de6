// Every stream, subject and bucket name in one place, under the deployment's prefix (NATS_PREFIX), so that
// several deployments (or parallel tests) can share one NATS server.
export interface BusNames {
  eventsStream: string;
  eventsSubject(shard: number): string;
  eventsWildcard: string;
  /** De-duplicated raw events, per shard, written by aggregators and read by flush. */
  rawStream: string;
  rawSubject(shard: number): string;
  rawWildcard: string;
  /**
   * The flush role's durable consumers of the raw stream, one per tier (flush/flusher.ts `FlushTier`): the live one's
   * acknowledgement floor is how far the store holds the events, the bulk one's how far it holds the other tables.
   */
  flushConsumer: string;
  flushBulkConsumer: string;
  /** Object store of aggregator checkpoints, one object per shard. */
  checkpointBucket: string;
  /** Core NATS (not stored): which input of each shard the flush role has written, after each write (bus/progress.ts). */
  flushedSubject: string;
  /** Requests to the flush role: `darshak replay`. */
  replaySubject: string;
  /** Requests to the flush role: a session's stored events, for an aggregator (flush/history-service.ts). */
  historySubject: string;
  clusterBucket: string;
  tenantsBucket: string;
  usersBucket: string;
  apiKeysBucket: string;
  usageBucket: string;
  rateBucket: string;
  /** When each API key was last used, to the minute. */
  keyUsageBucket: string;
  /** Public keys of every api process's token signer (docs/api.md). */
  jwksBucket: string;
  /** Ids of user tokens signed out one at a time, until they would have expired anyway. */
  revokedTokensBucket: string;
  serviceAccountsBucket: string;
  /** API requests per token per minute, shared by the api processes. */
  apiRateBucket: string;
  /** Failed logins per e-mail, for the 10-per-15-minutes limit. */
  loginsBucket: string;
  /** Detector signals: one message per aggregator batch (`signalsSubject(shard)`) and the alerts role's clock ticks. */
  signalsStream: string;
  signalsSubject(shard: number): string;
  signalsTickSubject: string;
  signalsWildcard: string;
  /** Alert versions as the alerts role writes them, for the flush role to store (per tenant). */
  alertsStream: string;
  alertRowsSubject(tenant: string): string;
  alertRowsWildcard: string;
  /** Once-only marks of the alerts role: content seen, quota thresholds crossed per month. */
  alertMarksBucket: string;
  /** The alerts role's leadership lease (one active per cluster). */
  alertsLeaseBucket: string;
  /** Alerts as they fire, for the live feed (core NATS, not stored). */
  alertsLiveSubject(tenant: string): string;
  /** Webhook endpoint records (docs/webhooks.md). */
  webhooksBucket: string;
  /** Events to deliver to webhook endpoints, per tenant: the seed's delivery body, published by alerts and the test ping. */
  webhookEventsStream: string;
  webhookEventsSubject(tenant: string): string;
  webhookEventsWildcard: string;
  /** One message per (event, endpoint) attempt to make: `new` ones and scheduled `retry` ones, read by two consumers. */
  webhookDeliveriesStream: string;
  webhookDeliverySubject(kind: 'new' | 'retry', endpointId: string): string;
  webhookDeliveryWildcard(kind: 'new' | 'retry'): string;
  /** Deliveries waiting for a disabled endpoint to be enabled again, per endpoint. */
  webhookHeldStream: string;
  webhookHeldSubject(endpointId: string): string;
  webhookHeldWildcard: string;
  /** The delivery log: the last 200 attempts per endpoint (one subject each). */
  webhookLogStream: string;
  webhookLogSubject(endpointId: string): string;
  webhookLogWildcard: string;
  /** One entry per webhook attempt made, so a delivery message that comes again is not sent twice (webhooks/attempts-made.ts). */
  webhookAttemptsBucket: string;
  /** Parquet export records (docs/export.md). */
  exportsBucket: string;
  /** The HMAC secret of signed export URLs, created once and shared by every api process. */
  exportSecretBucket: string;
  /** Which raw-stream messages the flusher wrote together (flush/groups.ts). */
  flushGroupsBucket: string;
}

export function busNames(prefix: string): BusNames {
  return {
    eventsStream: `${prefix}_events`,
    eventsSubject: (shard) => `${prefix}.events.${shard}`,
    eventsWildcard: `${prefix}.events.*`,
    rawStream: `${prefix}_raw`,
    rawSubject: (shard) => `${prefix}.raw.${shard}`,
    rawWildcard: `${prefix}.raw.*`,
    flushConsumer: 'flush',
    flushBulkConsumer: 'flush-bulk',
    checkpointBucket: `${prefix}_checkpoints`,
    flushedSubject: `${prefix}.progress.flushed`,
    replaySubject: `${prefix}.control.replay`,
    historySubject: `${prefix}.control.history`,
    clusterBucket: `${prefix}_cluster`,
    tenantsBucket: `${prefix}_tenants`,
    usersBucket: `${prefix}_users`,
    apiKeysBucket: `${prefix}_apikeys`,
    usageBucket: `${prefix}_usage`,
    rateBucket: `${prefix}_rate`,
    keyUsageBucket: `${prefix}_key_usage`,
    jwksBucket: `${prefix}_jwks`,
    revokedTokensBucket: `${prefix}_revoked_tokens`,
    serviceAccountsBucket: `${prefix}_service_accounts`,
    loginsBucket: `${prefix}_logins`,
    apiRateBucket: `${prefix}_api_rate`,
    signalsStream: `${prefix}_signals`,
    signalsSubject: (shard) => `${prefix}.signals.${shard}`,
    signalsTickSubject: `${prefix}.signals.tick`,
    signalsWildcard: `${prefix}.signals.*`,
    alertsStream: `${prefix}_alerts`,
    alertRowsSubject: (tenant) => `${prefix}.alerts.rows.${tenant}`,
    alertRowsWildcard: `${prefix}.alerts.rows.*`,
    alertMarksBucket: `${prefix}_alert_marks`,
    alertsLeaseBucket: `${prefix}_alerts_lease`,
    alertsLiveSubject: (tenant) => `${prefix}.alerts.live.${tenant}`,
    webhooksBucket: `${prefix}_webhooks`,
    webhookEventsStream: `${prefix}_webhook_events`,
    webhookEventsSubject: (tenant) => `${prefix}.webhooks.events.${tenant}`,
    webhookEventsWildcard: `${prefix}.webhooks.events.*`,
    webhookDeliveriesStream: `${prefix}_webhook_deliveries`,
    webhookDeliverySubject: (kind, endpointId) => `${prefix}.webhooks.${kind}.${endpointId}`,
    webhookDeliveryWildcard: (kind) => `${prefix}.webhooks.${kind}.*`,
    webhookHeldStream: `${prefix}_webhook_held`,
    webhookHeldSubject: (endpointId) => `${prefix}.webhooks.held.${endpointId}`,
    webhookHeldWildcard: `${prefix}.webhooks.held.*`,
    webhookLogStream: `${prefix}_webhook_log`,
    webhookLogSubject: (endpointId) => `${prefix}.webhooks.log.${endpointId}`,
    webhookLogWildcard: `${prefix}.webhooks.log.*`,
    webhookAttemptsBucket: `${prefix}_webhook_attempts`,
    exportsBucket: `${prefix}_exports`,
    exportSecretBucket: `${prefix}_export_secret`,
    flushGroupsBucket: `${prefix}_flush_groups`,
  };
}
