import { columns, type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';
import { isActive } from '../../src/aggregate/session.js';

/** Concurrent sessions per whole second (docs/metrics.md "Concurrency"): a signed count per (tenant, second). */
export const concurrencySeconds = {
  name: 'concurrency_seconds',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
  ],
  values: [['sessions', 'Int64']],
  live: true,
} as const satisfies TableSpec;

export const concurrencyColumns = columns(concurrencySeconds);

/** A session's last event counts for 30 s: `t - ts <= 30 s`, and until its next event. */
export const timeoutMs = 30_000;

export const concurrency: Pipeline = {
  name: 'concurrency',
  tables: [concurrencySeconds],
  segment(attrs, seg, sign, out) {
    if (!isActive(seg.state)) return;
    // Whole seconds t with from <= t*1000 <= from + 30 s and t*1000 < to.
    let endMs = seg.from + timeoutMs + 1;
    if (seg.to !== null && seg.to < endMs) endMs = seg.to;
    const first = Math.ceil(seg.from / 1000);
    const end = Math.ceil(endMs / 1000);
    if (end > first) out.addSeconds(concurrencySeconds, attrs.tenant, first, end, sign);
  },
};
