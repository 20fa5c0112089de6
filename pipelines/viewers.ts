import { type Emitter, type Pipeline, type SessionAttrs, type TableSpec } from '../src/aggregate/pipeline.js';

// Distinct viewers over long ranges (docs/store.md "Viewer windows"). Counting them from sessions hashes every viewer
// of the range at each query (600k viewers over 30 days at 100M events: 70–100 ms). Here each viewer has one row per
// window, holding the hours their sessions touched, so a query counts the rows with an hour in its range.

const hourS = 3600;
const hourMs = hourS * 1000;
/** Windows start every 32 days (Unix seconds from the epoch) and span 64: a range of up to 32 days lies within one. */
export const windowStepS = 32 * 86_400;
export const windowSpanS = 2 * windowStepS;

/** The window starts (Unix seconds) whose span holds the hour starting at `hourStartS` (Unix seconds). */
export function windowsOf(hourStartS: number): number[] {
  const w = Math.floor(hourStartS / windowStepS) * windowStepS;
  const out: number[] = [];
  for (let start = w; start > w - windowSpanS; start -= windowStepS) out.push(start);
  return out;
}

/** What viewers are counted by: all of a tenant's (''), per region, per content (sessions with one). */
export type Dim = '' | 'region' | 'content';

const dimValues = (a: SessionAttrs): Array<readonly [Dim, string]> =>
  a.content_id === '' ? [['', ''], ['region', a.region]] : [['', ''], ['region', a.region], ['content', a.content_id]];

/**
 * Per viewer, dimension value and window (`ts`, its start): how many of the viewer's sessions touched each hour of the
 * window (their span [first_ts, last_ts] overlaps it), as `hourMap` (hours since the window's start). Each hour is
 * written to both windows that hold it. `pair_key` hashes (dim, value, viewer), for matching the sessions that only
 * touch a range's partial hours (queries/viewers.ts).
 */
export const viewerWindows: TableSpec = {
  name: 'viewer_windows',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
    ['dim', 'LowCardinality(String)'],
    ['value', 'String'],
    ['viewer', 'String'],
    ['hour', 'UInt16'],
  ],
  values: [['sessions', 'Int64']],
  map: 'hourMap',
  derived: [['pair_key', 'UInt64', 'cityHash64(toString(dim), value, viewer)']],
  spanDays: windowSpanS / 86_400,
  // The same rows from `session_hours` (a row per session and hour of its span, latest version wins).
  rebuild: (scoped) => `INSERT INTO viewer_windows (tenant, ts, dim, value, viewer, \`hourMap.hour\`, \`hourMap.sessions\`)
    SETTINGS insert_deduplicate = 0, insert_deduplication_token = ''
    SELECT tenant, ts, dim, value, viewer, entries.1, entries.2 FROM (SELECT tenant, ts, dim, value, viewer, arraySort(groupArray((hour, sessions))) AS entries FROM (
      SELECT tenant, toDateTime(w, 'UTC') AS ts, dim, value, viewer, toUInt16(intDiv(h - w, ${hourS})) AS hour, toInt64(count()) AS sessions
      FROM (
        SELECT tenant, viewer, toUInt32(hour) AS h, d.1 AS dim, d.2 AS value FROM session_hours FINAL
        ARRAY JOIN arrayFilter(x -> x.1 != 'content' OR notEmpty(x.2), [('', ''), ('region', toString(region)), ('content', content_id)]) AS d
        WHERE notEmpty(viewer) ${scoped ? `AND tenant = {tenant:String} AND hour >= toDateTime({from_s:UInt32}, 'UTC') AND hour < toDateTime({to_s:UInt32} + ${windowSpanS}, 'UTC')` : ''}
      )
      ARRAY JOIN arrayMap(i -> intDiv(h, ${windowStepS}) * ${windowStepS} - i * ${windowStepS}, range(${windowSpanS / windowStepS})) AS w
      ${scoped ? "WHERE ts >= toDateTime({from_s:UInt32}, 'UTC') AND ts < toDateTime({to_s:UInt32}, 'UTC')" : ''}
      GROUP BY tenant, ts, dim, value, viewer, hour
    )
    GROUP BY tenant, ts, dim, value, viewer)`,
};

/** The hours (since the epoch) a session's span touches. */
function hoursOf(a: SessionAttrs): number[] {
  if (a.viewer === '' || a.first_minute === null || a.last_hour === null) return [];
  const hours: number[] = [];
  for (let h = Math.floor(a.first_minute / hourMs); h <= a.last_hour / hourMs; h++) hours.push(h);
  return hours;
}

/** Add `sign` to each hour in every window that holds it, for each dimension of the session. */
function touch(a: SessionAttrs, hours: Iterable<readonly [hour: number, sign: number]>, out: Emitter): void {
  const values = dimValues(a);
  for (const [hour, sign] of hours) {
    if (sign === 0) continue;
    const counted = [sign];
    for (const w of windowsOf(hour * hourS)) {
      for (let i = 0; i < values.length; i++) out.add(viewerWindows, [a.tenant, w, values[i]![0], values[i]![1], a.viewer, hour - w / hourS], counted);
    }
  }
}

const sameRows = (a: SessionAttrs, b: SessionAttrs): boolean => a.tenant === b.tenant && a.viewer === b.viewer && a.region === b.region && a.content_id === b.content_id;

export const viewers: Pipeline = {
  name: 'viewers',
  tables: [viewerWindows],
  sessionReads: ['tenant', 'viewer', 'region', 'content_id', 'first_minute', 'last_hour'],
  session(a, sign, out) {
    touch(
      a,
      hoursOf(a).map((h) => [h, sign] as const),
      out,
    );
  },
  // Mostly the span reached a new hour: only the hours that differ are retracted and added.
  sessionChange(before, after, out) {
    if (!sameRows(before, after)) {
      viewers.session!(before, -1, out);
      viewers.session!(after, 1, out);
      return;
    }
    const change = new Map<number, number>();
    for (const h of hoursOf(before)) change.set(h, (change.get(h) ?? 0) - 1);
    for (const h of hoursOf(after)) change.set(h, (change.get(h) ?? 0) + 1);
    touch(after, change, out);
  },
};
