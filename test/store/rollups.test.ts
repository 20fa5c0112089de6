import type { ClickHouseClient } from '@clickhouse/client';
import t from 'tap';
import { contentCatalog, contentMinuteSums } from '../../pipelines/content/pipeline.js';
import { snapshotTables } from '../../pipelines/index.js';
import type { Cell } from '../../src/metric/pipeline.js';
import { catalogueSql, topContent } from '../../pipelines/content/read.js';
import { sumsBy, tiers, type Range } from '../../src/store/queries/range.js';
import { createTableSql, ensureSnapshotTables, insertSnapshotRows } from '../../src/store/snapshots.js';
import { embeddedClient } from '../helpers/store.js';

// Long ranges read `content_minute_sums` from its hourly and daily projections and only the edge minutes from its rows;
// top content reads the catalogue from its `latest` projection (pipelines/content/pipeline.ts). Pinned here: the cut of a range
// into tiers, sums equal to a plain sum over the minutes for ranges of every shape (also after a merge and a replay's
// DELETE), the projections added to a store created before them, and the reads ClickHouse answers from them.

const minute = 60_000;
const hour = 60 * minute;
const day = 24 * hour;

t.test('a range cut into days, hours and edge minutes covers it exactly once', async (t) => {
  // Whole days, recent enough for nothing; only the arithmetic matters here.
  const d0 = Date.UTC(2026, 10, 1);
  const cases: Array<[string, Range, { minutes: number; hours: number; days: number }]> = [
    ['inside one hour', { from: d0 + 10 * minute, to: d0 + 50 * minute }, { minutes: 1, hours: 0, days: 0 }],
    [
      'across one hour boundary',
      { from: d0 + 50 * minute, to: d0 + hour + 5 * minute },
      { minutes: 1, hours: 0, days: 0 },
    ],
    [
      '24 h, unaligned',
      { from: d0 + 5 * hour + 17 * minute, to: d0 + day + 5 * hour + 17 * minute },
      { minutes: 2, hours: 1, days: 0 },
    ],
    ['24 h on whole hours', { from: d0 + 5 * hour, to: d0 + day + 5 * hour }, { minutes: 0, hours: 1, days: 0 }],
    [
      '30 d, unaligned',
      { from: d0 + 3 * hour + 1 * minute, to: d0 + 30 * day + 3 * hour + minute },
      { minutes: 2, hours: 2, days: 1 },
    ],
    ['whole days', { from: d0, to: d0 + 7 * day }, { minutes: 0, hours: 0, days: 1 }],
    ['one day and a bit', { from: d0 + 23 * hour, to: d0 + 2 * day + 30 * minute }, { minutes: 1, hours: 1, days: 1 }],
  ];
  for (const [name, range, counts] of cases) {
    const cut = tiers(range);
    t.same(
      { minutes: cut.minutes.length, hours: cut.hours.length, days: cut.days.length },
      counts,
      `${name}: spans per tier`,
    );
    const all = [...cut.minutes, ...cut.hours, ...cut.days].sort((a, b) => a[0] - b[0]);
    let at = range.from / 1000;
    for (const [a, b] of all) {
      t.equal(a, at, `${name}: spans follow each other without gap or overlap`);
      at = b;
    }
    t.equal(at, range.to / 1000, `${name}: and end at the range's end`);
    t.ok(
      cut.hours.every(([a, b]) => a % 3600 === 0 && b % 3600 === 0),
      `${name}: hour spans on whole hours`,
    );
    t.ok(
      cut.days.every(([a, b]) => a % 86_400 === 0 && b % 86_400 === 0),
      `${name}: day spans on whole UTC days`,
    );
  }
});

t.test('with embedded ClickHouse', async (t) => {
  const client: ClickHouseClient = await embeddedClient(t, 'rollups');
  // Settings stick to chDB's session: each read says whether it forces a projection.
  const rows = async <T>(query: string, params: Record<string, unknown> = {}, force = false): Promise<T[]> =>
    (
      await client.query({
        query,
        query_params: params,
        format: 'JSONEachRow',
        clickhouse_settings: { force_optimize_projection: force ? 1 : 0 },
      })
    ).json<T>();

  // A store from before the projections: the same tables without them, already holding rows.
  for (const table of [contentMinuteSums, contentCatalog])
    await client.command({ query: createTableSql({ ...table, projections: undefined }) });
  // 40 days of minutes for three contents, ending at the last whole hour; a deterministic spread of values.
  const end = Math.floor(Date.now() / hour) * hour;
  const start = end - 40 * day;
  const minuteRows: Cell[][] = [];
  for (let ts = start, i = 0; ts < end; ts += 7 * minute, i++) {
    minuteRows.push(['t1', ts / 1000, `c${i % 3}`, -1, 1 + ((i * 7919) % 1000), 0, 0]);
    if (i % 5 === 0) minuteRows.push(['t2', ts / 1000, 'c0', -1, 3, 0, 0]);
  }
  await insertSnapshotRows(client, contentMinuteSums, minuteRows.slice(0, 5000), 'before:1');
  await insertSnapshotRows(client, contentMinuteSums, minuteRows.slice(5000), 'before:2');
  const catalogRows: Cell[][] = [
    ['t1', 'c0', end - 9 * day, 0, 'From a play', 'movie', null],
    ['t1', 'c0', end - 8 * day, 1, 'Published title', 'episode', 1800],
    ['t1', 'c0', end - 2 * day, 0, 'Later play title', 'clip', null],
    ['t1', 'c1', end - 5 * day, 0, 'Old title', '', null],
    ['t1', 'c1', end - 3 * day, 0, 'New title', '', null],
    ['t1', 'c1', end - 1 * day, 0, '', 'live', null],
    ['t1', 'c2', end - 4 * day, 1, 'First cut', 'movie', 3600],
    ['t1', 'c2', end - 2 * day, 1, 'Final cut', 'movie', 5400],
  ];
  await insertSnapshotRows(client, contentCatalog, catalogRows, 'before:3');

  await ensureSnapshotTables(client, snapshotTables, 90);
  const built = await rows<{ table: string; name: string }>(
    `SELECT DISTINCT table, name FROM system.projection_parts WHERE database = currentDatabase() AND active AND table IN ('content_minute_sums', 'content_catalog') ORDER BY table, name`,
  );
  t.same(
    built.map((r) => `${r.table}.${r.name}`),
    ['content_catalog.latest', 'content_minute_sums.days', 'content_minute_sums.hours'],
    'the projections are added to the old tables and built for the rows they held',
  );
  await ensureSnapshotTables(client, snapshotTables, 90);
  t.pass('and opening the store again leaves them be');

  const plain = async (tenant: string, r: Range): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const row of await rows<{ k: string; v: string }>(
      `SELECT content_id AS k, sum(watch_ms) AS v FROM content_minute_sums WHERE tenant = {tenant:String}
         AND ts >= toDateTime({a:UInt32}, 'UTC') AND ts < toDateTime({b:UInt32}, 'UTC') GROUP BY k`,
      { tenant, a: r.from / 1000, b: r.to / 1000 },
    )) {
      out[row.k] = Number(row.v);
    }
    return out;
  };
  const ranges: Array<[string, Range]> = [
    ['last 24 h to a minute', { from: end - day - 13 * minute, to: end - 13 * minute }],
    ['30 d to a minute', { from: end - 30 * day + 29 * minute, to: end + 29 * minute }],
    ['7 d on whole days', { from: Math.floor(end / day) * day - 7 * day, to: Math.floor(end / day) * day }],
    ['within one hour', { from: end - 50 * minute, to: end - 10 * minute }],
    ['beyond the rows at both ends', { from: start - 3 * day - minute, to: end + day + minute }],
  ];
  const check = async (when: string): Promise<void> => {
    for (const [name, r] of ranges) {
      for (const tenant of ['t1', 't2', 'nobody']) {
        const sums = await sumsBy(client, 'content_minute_sums', ['content_id'], ['watch_ms'], tenant, r);
        t.same(
          Object.fromEntries(sums.map(({ keys, sums: [ms] }) => [String(keys[0]), ms])),
          await plain(tenant, r),
          `${when}: ${name}, ${tenant}`,
        );
      }
    }
  };
  await check('as stored');

  // Signed deltas for keys already stored (a late event's retraction and re-add), then merged away.
  await insertSnapshotRows(
    client,
    contentMinuteSums,
    [
      ['t1', (end - 2 * day) / 1000, 'c0', -1, -400, 0, 0],
      ['t1', (end - 2 * day) / 1000, 'c0', -1, 150, 0, 0],
    ],
    'late:1',
  );
  await check('after signed deltas');
  await client.command({ query: 'OPTIMIZE TABLE content_minute_sums FINAL' });
  await check('after a merge');
  // What replay does to a range before writing it again (flush/replay.ts).
  await client.command({
    query: `DELETE FROM content_minute_sums WHERE tenant = 't1' AND ts >= toDateTime({a:UInt32}, 'UTC') AND ts < toDateTime({b:UInt32}, 'UTC')`,
    query_params: { a: (end - 10 * day + 7 * minute) / 1000, b: (end - 8 * day) / 1000 },
    clickhouse_settings: { lightweight_deletes_sync: '2' },
  });
  await check("after a replay's DELETE");

  // The reads ClickHouse must answer from a projection (it fails the query otherwise).
  const force = true;
  const cut = tiers({ from: end - 30 * day + 29 * minute, to: end + 29 * minute });
  for (const [tier, column, span] of [
    ['hours', 'toStartOfHour(ts)', cut.hours[0]!],
    ['days', 'toStartOfDay(ts)', cut.days[0]!],
  ] as const) {
    const [row] = await rows<{ n: string }>(
      `SELECT count() AS n FROM (SELECT content_id, furthest_sec, sum(watch_ms), sum(sessions), sum(completion_sum) FROM content_minute_sums
         WHERE tenant = 't1' AND ${column} >= toDateTime({a:UInt32}, 'UTC') AND ${column} < toDateTime({b:UInt32}, 'UTC') GROUP BY content_id, furthest_sec)`,
      { a: span[0], b: span[1] },
      force,
    );
    t.equal(Number(row!.n), 3, `the ${tier} of watch time and completion are read from the projection`);
  }
  await rows(catalogueSql.catalogue, { tenant: 't1', ids: ['c0', 'c1'] }, force);
  t.pass("a page's titles, types and published durations are read from the projection");

  // Titles and types as docs/metrics.md "Top content" says: the latest content_published's, else the latest event's
  // that carries each.
  const { items } = await topContent(client, 't1', { from: end - 30 * day, to: end });
  t.same(
    items.map((i) => [i.content_id, i.title, i.content_type]).sort(),
    [
      ['c0', 'Published title', 'episode'],
      ['c1', 'New title', 'live'],
      ['c2', 'Final cut', 'movie'],
    ],
    'titles and types from the catalogue',
  );
  const sums = await plain('t1', { from: end - 30 * day, to: end });
  t.same(
    Object.fromEntries(items.map((i) => [i.content_id, Math.round(i.watch_hours * 3_600_000)])),
    sums,
    'watch time as summed',
  );
});
