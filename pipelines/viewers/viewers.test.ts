import type { ClickHouseClient } from '@clickhouse/client';
import t from 'tap';
import { Rng } from '../../bench/simulator/rng.js';
import { pipelines, snapshotTables } from '../index.js';
import { viewerWindows, windowStepS, type Dim } from './pipeline.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import type { WireEvent } from '../../src/bus/wire.js';
import { topContent } from '../content/read.js';
import { viewersBy, viewersIn } from './read.js';
import { ensureSnapshotTables, insertSnapshotRows } from '../../src/store/snapshots.js';
import { eventAt } from '../../test/helpers/pipeline.js';
import { embeddedClient } from '../../test/helpers/store.js';

// Distinct viewers from `viewer_windows` (docs/store.md "Viewer windows"): sessions of every length around a window's
// start, whose viewer, region and content are settled by events arriving in any order over many flushes, are counted
// for ranges of every shape and checked against the definition applied to the sessions themselves. Also: the rows the
// aggregator wrote equal those that replay and the migration compute from `session_hours`.

const client: ClickHouseClient = await embeddedClient(t, 'viewers');

const minute = 60_000;
const hour = 60 * minute;
const day = 24 * hour;
// The latest window start: sessions from 20 days before it to 20 days after, so they fall in three windows.
const w0 = Math.floor(Date.now() / 1000 / windowStepS) * windowStepS * 1000;
const rand = new Rng(42);
const r = (): number => rand.next();
const pick = <T>(xs: readonly T[]): T => rand.pick(xs);

interface Session {
  id: string;
  first: number;
  last: number;
  viewer: string;
  region: string;
  content: string;
  events: WireEvent[];
}

/**
 * A session's events: its viewer is anonymous until an event names the user (viewer = user), and its region and
 * content are the first non-empty ones in time order; some carry them only on later events.
 */
function session(i: number): Session {
  const first = w0 - 20 * day + Math.floor(r() * 40 * day) + Math.floor(r() * 60) * 1000;
  const length = pick([0, 30_000, 5 * minute, 50 * minute, 3 * hour, 26 * hour]) + Math.floor(r() * 10 * minute);
  const last = first + length;
  const user = r() < 0.6 ? `u${Math.floor(r() * 12)}` : '';
  const anon = r() < 0.9 ? `a${Math.floor(r() * 12)}` : '';
  const region = pick(['Goa', 'Kerala', '']);
  const content = pick(['c1', 'c2', 'c3', '']);
  const times = [
    first,
    ...Array.from({ length: Math.floor(r() * 3) }, () => first + Math.floor(r() * length)),
    last,
  ].sort((a, b) => a - b);
  const late = r() < 0.5; // the attributes arrive with a later event only
  const events = times.map((ts, j) =>
    eventAt(j === 0 ? 'play_start' : 'heartbeat', ts, {
      session_id: `s${i}`,
      region: late && j === 0 ? '' : region,
      ...(content !== '' && !(late && j === 0) ? { content_id: content } : {}),
      ...(anon !== '' ? { anonymous_id: anon } : {}),
      ...(user !== '' && (j === times.length - 1 || !late) ? { user_id: user } : {}),
    }),
  );
  return { id: `s${i}`, first, last, viewer: user || anon, region, content, events };
}

// A range whose edges fall inside hours, and sessions a minute either side of each edge, each its own viewer.
const edgeFrom = w0 + 2 * day + 17 * minute;
const edgeTo = edgeFrom + 5 * day + 29 * minute;
const edgeSession = (id: string, first: number, last: number, region = 'Goa', content = 'c1'): Session => ({
  id,
  first,
  last,
  viewer: id,
  region,
  content,
  events: [first, last].map((ts, j) =>
    eventAt(j === 0 ? 'play_start' : 'heartbeat', ts, { session_id: id, region, content_id: content, user_id: id }),
  ),
});
const sessions = [
  ...Array.from({ length: 120 }, (_, i) => session(i)),
  edgeSession('ends-at-from', edgeFrom - 10 * minute, edgeFrom + 20_000),
  edgeSession('ends-just-before', edgeFrom - 10 * minute, edgeFrom - 1000),
  edgeSession('starts-before-to', edgeTo - 30_000, edgeTo + 5 * minute),
  edgeSession('starts-at-to', edgeTo, edgeTo + 5 * minute),
  // The only session of its region and content, two weeks before the window's start: in the window, outside most ranges.
  edgeSession('lone', w0 - 15 * day, w0 - 15 * day + 10 * minute, 'Assam', 'c9'),
];

/** The definition: distinct non-empty viewers of the sessions with first < to and last >= from, per value of `dim`. */
function expected(dim: Dim, from: number, to: number): Record<string, number> {
  const sets = new Map<string, Set<string>>();
  for (const s of sessions) {
    if (!(s.first < to && s.last >= from) || s.viewer === '' || (dim === 'content' && s.content === '')) continue;
    const value = dim === 'region' ? s.region : dim === 'content' ? s.content : '';
    if (!sets.has(value)) sets.set(value, new Set());
    sets.get(value)!.add(s.viewer);
  }
  return Object.fromEntries([...sets].map(([v, set]): [string, number] => [v, set.size]).sort());
}

const sorted = (m: Map<string, number>): Record<string, number> =>
  Object.fromEntries([...m].filter(([, n]) => n > 0).sort());

t.before(async () => {
  await ensureSnapshotTables(client, snapshotTables, 400);
  const agg = new Aggregation(pipelines, 100 * day);
  const events = sessions.flatMap((s) => s.events).sort(() => r() - 0.5);
  let flush = 0;
  const write = async (): Promise<void> => {
    const { rows } = agg.drain(++flush);
    for (const table of snapshotTables)
      await insertSnapshotRows(client, table, rows.get(table.name) ?? [], `test:${flush}:${table.name}`);
  };
  for (const [i, e] of events.entries()) {
    agg.apply(e);
    if (i % 37 === 36) await write();
  }
  await write();
});

t.test('every range shape counts the viewers of its sessions', async (t) => {
  const ranges: Array<[string, number, number]> = [];
  for (let i = 0; i < 40; i++) {
    const length =
      pick([2 * hour, 26 * hour, 3 * day, 7 * day, 30 * day, 32 * day - 2 * hour]) + Math.floor(r() * 120) * minute;
    const to = w0 - 5 * day + Math.floor((r() * 25 * day) / minute) * minute;
    ranges.push([`${(length / hour).toFixed(1)} h to ${new Date(to).toISOString()}`, to - length, to]);
  }
  // Edges on whole hours, and on the minutes next to them.
  ranges.push(
    ['edges a minute from sessions', edgeFrom, edgeTo],
    ['whole hours', w0 - 3 * day, w0 + 2 * day],
    ['a minute past', w0 - 3 * day + minute, w0 + 2 * day + minute],
    ['a minute before', w0 - 3 * day - minute, w0 + 2 * day - minute],
  );
  for (const [label, from, to] of ranges) {
    for (const dim of ['', 'region', 'content'] as const) {
      const counts = await viewersBy(client, 'acme', dim, [{ from, to }]);
      if (!counts) {
        t.ok(to - from > 30 * day, `${label}: only a range over 30 days can miss a window`);
        continue;
      }
      t.same(
        sorted(new Map([...counts].map(([v, [n]]) => [v, n!]))),
        expected(dim, from, to),
        `${label}, by ${dim || 'tenant'}`,
      );
    }
  }
});

t.test('several ranges in one scan, and the fallback to sessions', async (t) => {
  const to = w0 + 3 * day + 17 * minute;
  const ranges = [
    { from: to - 30 * day, to },
    { from: to - 7 * day, to },
    { from: to - 14 * day, to: to - 7 * day },
  ];
  const counts = await viewersBy(client, 'acme', '', ranges);
  t.same(
    counts?.get(''),
    ranges.map((x) => expected('', x.from, x.to)['']),
    'the overview month and its two weeks',
  );
  // Ranges that share partial hours, each with edge sessions in them that are in it and not in the others: each
  // range must count only its own sessions there, however the partial hours are read.
  const sharing = [
    { from: edgeFrom, to: edgeTo },
    { from: edgeTo, to: edgeTo + 3 * day },
    { from: edgeFrom - 2 * day, to: edgeFrom },
  ];
  for (const dim of ['', 'region', 'content'] as const) {
    const byRange = await viewersBy(client, 'acme', dim, sharing);
    sharing.forEach((x, i) => {
      const got = sorted(new Map([...byRange!].map(([v, n]) => [v, n[i]!])));
      t.same(
        got,
        expected(dim, x.from, x.to),
        `partial hours shared by several ranges: range ${i}, by ${dim || 'tenant'}`,
      );
    });
  }
  t.equal(await viewersBy(client, 'acme', '', [{ from: to - 40 * day, to }]), null, 'longer than a window');
  t.equal(await viewersBy(client, 'acme', '', [{ from: to - 50 * minute, to }]), null, 'no whole hour');
  // The answers list only values with viewers in the range, whichever way they are counted: a region or content seen
  // elsewhere in the window must not show up with 0.
  const listed = async (dim: Dim, from: number): Promise<Record<string, number>> =>
    Object.fromEntries([...(await viewersIn(client, 'acme', dim, { from, to }))].sort());
  for (const [from, label] of [
    [to - 40 * day, 'longer than a window'],
    [to - 4 * day, 'four days, from the window'],
    [to - day, 'a day, from sessions'],
  ] as const) {
    for (const dim of ['', 'region', 'content'] as const)
      t.same(await listed(dim, from), expected(dim, from, to), `${label}, by ${dim || 'tenant'}`);
  }
});

t.test('some values only (a page of top content), and pages of top content', async (t) => {
  const to = w0 + 3 * day + 17 * minute;
  for (const [from, label] of [
    [to - 40 * day, 'longer than a window'],
    [to - 4 * day, 'four days, from the window'],
    [to - day, 'a day, from sessions'],
  ] as const) {
    for (const dim of ['region', 'content'] as const) {
      const all = expected(dim, from, to);
      // Every other value, and one that has no viewers at all.
      const some = Object.keys(all).filter((_, i) => i % 2 === 0);
      const got = Object.fromEntries(
        [...(await viewersIn(client, 'acme', dim, { from, to }, [...some, 'nowhere']))].sort(),
      );
      t.same(
        got,
        Object.fromEntries(some.map((v) => [v, all[v]])),
        `${label}, ${some.length} of ${Object.keys(all).length} values by ${dim}`,
      );
    }
    t.same(await viewersIn(client, 'acme', 'content', { from, to }, []), new Map(), `${label}: no values, no viewers`);
    // A page reads viewers and titles for its own contents: it must equal the same slice of the whole list.
    const whole = await topContent(client, 'acme', { from, to });
    t.ok(whole.total >= 3, `${label}: ${whole.total} contents`);
    t.equal(whole.items.length, whole.total);
    for (const [limit, offset] of <[number, number][]>[
      [1, 0],
      [2, 1],
      [50, 1],
      [5, whole.total],
    ]) {
      t.same(
        await topContent(client, 'acme', { from, to }, limit, offset),
        { items: whole.items.slice(offset, offset + limit), total: whole.total },
        `${label}: limit ${limit}, offset ${offset}`,
      );
    }
  }
});

t.test('the rows replay and the migration compute from session_hours are those the aggregator wrote', async (t) => {
  const read = async (): Promise<unknown[]> =>
    (
      await client.query({
        query: `SELECT tenant, toUnixTimestamp(ts) AS ts, dim, value, viewer, arraySort(arrayZip(hourMap.hour, hourMap.sessions)) AS entries
          FROM viewer_windows FINAL WHERE notEmpty(hourMap.hour) ORDER BY tenant, ts, dim, value, viewer`,
        format: 'JSONEachRow',
      })
    ).json();
  const live = await read();
  t.ok(live.length > 100, `${live.length} rows`);
  await client.command({ query: 'TRUNCATE TABLE viewer_windows' });
  await client.command({ query: viewerWindows.rebuild!(false) });
  t.same(await read(), live);
});
