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
  /** Object store of aggregator checkpoints, one object per shard. */
  checkpointBucket: string;
  /** Requests to the flush role: `darshak replay`. */
  replaySubject: string;
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
  serviceAccountsBucket: string;
  /** API requests per token per minute, shared by the api processes. */
  apiRateBucket: string;
  /** Failed logins per e-mail, for the 10-per-15-minutes limit. */
  loginsBucket: string;
  /** Alerts as they fire, for the live feed (core NATS, not stored). */
  alertsLiveSubject(tenant: string): string;
}

export function busNames(prefix: string): BusNames {
  return {
    eventsStream: `${prefix}_events`,
    eventsSubject: (shard) => `${prefix}.events.${shard}`,
    eventsWildcard: `${prefix}.events.*`,
    rawStream: `${prefix}_raw`,
    rawSubject: (shard) => `${prefix}.raw.${shard}`,
    rawWildcard: `${prefix}.raw.*`,
    checkpointBucket: `${prefix}_checkpoints`,
    replaySubject: `${prefix}.control.replay`,
    clusterBucket: `${prefix}_cluster`,
    tenantsBucket: `${prefix}_tenants`,
    usersBucket: `${prefix}_users`,
    apiKeysBucket: `${prefix}_apikeys`,
    usageBucket: `${prefix}_usage`,
    rateBucket: `${prefix}_rate`,
    keyUsageBucket: `${prefix}_key_usage`,
    jwksBucket: `${prefix}_jwks`,
    serviceAccountsBucket: `${prefix}_service_accounts`,
    loginsBucket: `${prefix}_logins`,
    apiRateBucket: `${prefix}_api_rate`,
    alertsLiveSubject: (tenant) => `${prefix}.alerts.live.${tenant}`,
  };
}
