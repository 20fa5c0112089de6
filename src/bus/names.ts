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
  };
}
