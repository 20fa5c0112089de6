import { type Pipeline, type TableSpec } from '../src/aggregate/pipeline.js';

/**
 * One row per session, replaced whenever the session changes: who watched what, where, on which device, for how
 * far. Viewer counts (MAU, unique viewers, geo viewers), device shares and completion are read from it.
 */
export const sessions: TableSpec = {
  name: 'sessions',
  engine: 'replace',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['session_id', 'String'],
  ],
  values: [
    ['first_ts', 'DateTime64(3)'],
    ['last_ts', 'DateTime64(3)'],
    ['viewer', 'String'],
    ['content_id', 'String'],
    ['region', 'LowCardinality(String)'],
    ['country', 'LowCardinality(String)'],
    ['pop', 'LowCardinality(String)'],
    ['device', 'LowCardinality(String)'],
    ['events', 'UInt64'],
    ['furthest_sec', 'Float64'],
    ['duration_sec', 'Nullable(Float64)'],
    ['ended', 'UInt8'],
    ['version', 'UInt64'],
  ],
};

export const audience: Pipeline = {
  name: 'audience',
  tables: [sessions],
  snapshot({ attrs: a, first_ts, last_ts, events }, out) {
    out.put(sessions, [a.tenant, a.session_id, first_ts, last_ts, a.viewer, a.content_id, a.region, a.country, a.pop, a.device, events, a.furthest_sec, a.duration_sec, a.ended ? 1 : 0]);
  },
};
