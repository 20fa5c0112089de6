import { type Pipeline, type TableSpec } from '../../src/metric/pipeline.js';

const hourMs = 3_600_000;

/**
 * A session's latest values, once for each UTC hour its span [first_ts, last_ts] touches (`hour`, its start). Viewer
 * counts (MAU, unique viewers, geo viewers), device shares and completion are read from it.
 *
 * Why by hour: a query reads only the hours of its range (the key is tenant, hour), and counts each session once,
 * in the row of its first hour within the range (docs/store.md "Reading sessions"). A session's span only widens, so
 * it never leaves an hour it was written to, and every row of a session is rewritten with its latest values.
 * Partitioned by day: old days merge to one part each, and FINAL has nothing left to merge there.
 * `viewer_key`, a 64-bit hash of the viewer (0 for none), is what distinct viewers are counted by.
 */
export const sessionHours: TableSpec = {
  name: 'session_hours',
  engine: 'replace',
  partitionBy: 'toYYYYMMDD(hour)',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['hour', 'DateTime'],
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
  derived: [['viewer_key', 'UInt64', "if(viewer = '', 0, cityHash64(viewer))"]],
};

export const audience: Pipeline = {
  name: 'audience',
  tables: [sessionHours],
  // What counts a session in or out of an answer at once; its progress (last_ts, events, furthest_sec) may wait.
  snapshotNow: ['viewer', 'content_id', 'region', 'country', 'pop', 'device', 'duration_sec', 'ended', 'closed_at'],
  snapshot({ attrs: a, first_ts, last_ts, events }, out) {
    for (let hour = Math.floor(first_ts / hourMs) * hourMs; hour <= last_ts; hour += hourMs) {
      out.put(sessionHours, [
        a.tenant,
        hour / 1000,
        a.session_id,
        first_ts,
        last_ts,
        a.viewer,
        a.content_id,
        a.region,
        a.country,
        a.pop,
        a.device,
        events,
        a.furthest_sec,
        a.duration_sec,
        a.ended ? 1 : 0,
      ]);
    }
  },
};
