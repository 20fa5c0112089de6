import { pipelines } from '../../pipelines/index.js';
import type { ModuleDef } from '../modules.js';
import { ShardAggregator } from './shard.js';

/** `AGGREGATE_SHARDS` (or `--shards`) as shard numbers; empty means every shard. */
export function shardsOf(list: readonly string[], shards: number): number[] {
  if (list.length === 0) return Array.from({ length: shards }, (_, i) => i);
  const out = list.map((s) => {
    const n = /^\d+$/.test(s) ? Number(s) : NaN;
    if (!(n >= 0 && n < shards))
      throw new Error(
        `config: AGGREGATE_SHARDS (aggregate_shards) holds ${JSON.stringify(s)}; shards are 0 to ${shards - 1}`,
      );
    return n;
  });
  return [...new Set(out)].sort((a, b) => a - b);
}

export const aggregateRole: ModuleDef = {
  deps: ['bus'],
  // A shard rebuilding its state may ask the flush role for stored sessions (recall.ts): in one process, flush must
  // be up first, and stop after.
  after: ['flush'],
  role: true,
  async start(services) {
    const { config } = services;
    const bus = services.get('bus');
    const shards = shardsOf(config.aggregate_shards, config.shards);
    const aggregators = shards.map(
      (shard, i) =>
        new ShardAggregator(
          bus,
          shard,
          {
            pipelines,
            checkpointEveryMs: config.checkpoint_interval_ms,
            checkpointPhase: i / shards.length,
            flushIntervalMs: config.aggregate_flush_interval_ms,
            // A batch holds up to about 2 MB of input; publishing them one after another, each waiting for its
            // acknowledgement between two input messages, 8 in flight left the shard waiting about a sixth of its time.
            maxInflight: 32,
            sessionRetainMs: config.aggregate_session_retain_ms,
            snapshotEveryMs: config.session_snapshot_interval_ms,
          },
          services.log,
        ),
    );
    await Promise.all(aggregators.map((a) => a.start()));
    services.log.child({ module: 'aggregate' }).info({ shards: aggregators.map((a) => a.shard) }, 'aggregating');
    return {
      async stop() {
        await Promise.all(aggregators.map((a) => a.stop()));
      },
    };
  },
};
