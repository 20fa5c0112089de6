import type { ClickHouseClient } from '@clickhouse/client';
import t from 'tap';
import { pipelines, snapshotTables } from '../../pipelines/index.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import type { WireEvent } from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { migrate } from '../../src/store/migrate.js';
import { devices, geo, overview, topContent } from '../../src/store/queries/index.js';
import { changePct } from '../../src/store/queries/range.js';
import { ensureSnapshotTables, insertSnapshotRows } from '../../src/store/snapshots.js';
import { eventAt } from '../helpers/pipeline.js';
import { embeddedClient } from '../helpers/store.js';

// The sessions of a range are read from `session_hours`: a row per session and UTC hour of its span, read for the
// range's hours only, each session counted in one row (docs/store.md "Reading sessions"). These sessions sit on every
// side of the range's edges, which fall inside hours, and span one to many hours; one is widened into an earlier hour
// by a late event, so two versions of it are stored. Every count is checked against the definition applied to the
// sessions directly. Also: the migration that moved `sessions` rows into `session_hours`.

const log = createLogger('silent');
const client: ClickHouseClient = await embeddedClient(t, 'sessions');

const minute = 60_000;
const hour = 60 * minute;
const day = 24 * hour;
// Recent, so the tables' retention keeps the rows; whole hours, so the edges below sit where they say.
const h0 = Math.floor(Date.now() / hour) * hour - 6 * hour;
const from = h0 + 17 * minute;
const to = h0 + 3 * hour;

interface Spec {
  id: string;
  first: number;
  last: number;
  viewer: string;
  device: string;
  region: string;
  content: string;
}

const specs: Spec[] = [
  {
    id: 'before',
    first: h0 - 2 * hour,
    last: h0 - 90 * minute,
    viewer: 'u1',
    device: 'tv',
    region: 'Goa',
    content: 'c1',
  },
  {
    id: 'ends-just-before',
    first: h0 - 30 * minute,
    last: from - 1000,
    viewer: 'u2',
    device: 'mobile',
    region: 'Goa',
    content: 'c1',
  },
  {
    id: 'ends-at-from',
    first: h0 - 30 * minute,
    last: from,
    viewer: 'u3',
    device: 'mobile',
    region: 'Kerala',
    content: 'c1',
  },
  {
    id: 'inside-first-hour',
    first: h0 + 10 * minute,
    last: h0 + 20 * minute,
    viewer: 'u1',
    device: 'tv',
    region: 'Kerala',
    content: 'c2',
  },
  {
    id: 'long',
    first: h0 - 3 * hour,
    last: h0 + 5 * hour,
    viewer: 'u4',
    device: 'desktop',
    region: 'Goa',
    content: 'c2',
  },
  {
    id: 'next-hour',
    first: h0 + 65 * minute,
    last: h0 + 70 * minute,
    viewer: 'u1',
    device: 'tv',
    region: 'Goa',
    content: 'c1',
  },
  {
    id: 'starts-before-to',
    first: to - minute,
    last: to + minute,
    viewer: 'u5',
    device: 'tablet',
    region: 'Goa',
    content: 'c3',
  },
  {
    id: 'starts-at-to',
    first: to,
    last: to + 5 * minute,
    viewer: 'u6',
    device: 'tablet',
    region: 'Goa',
    content: 'c3',
  },
  {
    id: 'anonymous',
    first: h0 + 30 * minute,
    last: h0 + 40 * minute,
    viewer: '',
    device: 'mobile',
    region: 'Kerala',
    content: 'c3',
  },
  {
    id: 'widened-late',
    first: h0 - 20 * minute,
    last: h0 + 50 * minute,
    viewer: 'u7',
    device: 'mobile',
    region: 'Goa',
    content: 'c2',
  },
  // For the weeks of the overview: one session in the week before the last, one across the line between the two.
  {
    id: 'week-before',
    first: to - 8 * day,
    last: to - 8 * day + 10 * minute,
    viewer: 'u8',
    device: 'tv',
    region: 'Goa',
    content: 'c1',
  },
  {
    id: 'across-weeks',
    first: to - 7 * day - 5 * minute,
    last: to - 7 * day + 5 * minute,
    viewer: 'u9',
    device: 'tv',
    region: 'Goa',
    content: 'c1',
  },
  {
    id: 'month-ago',
    first: to - 31 * day,
    last: to - 30 * day,
    viewer: 'u10',
    device: 'tv',
    region: 'Goa',
    content: 'c1',
  },
];

const event = (s: Spec, type: string, ts: number): WireEvent =>
  eventAt(type, ts, {
    session_id: s.id,
    content_id: s.content,
    region: s.region,
    device: s.device,
    ...(s.viewer === '' ? {} : { user_id: s.viewer }),
  });

t.test('each session of the range counted once, wherever its hours fall', async (t) => {
  await migrate(client, log);
  await ensureSnapshotTables(client, snapshotTables, 90);
  const agg = new Aggregation(pipelines, 86_400_000);
  const write = async (version: number): Promise<void> => {
    const { rows } = agg.drain(version);
    for (const table of snapshotTables)
      await insertSnapshotRows(client, table, rows.get(table.name) ?? [], `test:${version}:${table.name}`);
  };
  const late = specs.find((s) => s.id === 'widened-late')!;
  for (const s of specs) {
    // The late session is first seen from 10:40 only: its row for 10:00 says it started there.
    agg.apply(event(s, 'play_start', s === late ? h0 + 40 * minute : s.first));
    agg.apply(event(s, 'heartbeat', s.last));
  }
  await write(1);
  agg.apply(event(late, 'play_start', late.first));
  await write(2);

  const inRange = (s: Spec, a: number, b: number): boolean => s.first < b && s.last >= a;
  const sessions = specs.filter((s) => inRange(s, from, to));
  t.same(
    sessions.map((s) => s.id),
    ['ends-at-from', 'inside-first-hour', 'long', 'next-hour', 'starts-before-to', 'anonymous', 'widened-late'],
    'the cases the range is meant to cut',
  );
  const count = <K extends string>(list: Spec[], keyOf: (s: Spec) => K): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const s of list) out[keyOf(s)] = (out[keyOf(s)] ?? 0) + 1;
    return out;
  };
  const distinctViewers = (list: Spec[]): number =>
    new Set(list.filter((s) => s.viewer !== '').map((s) => s.viewer)).size;

  const range = { from, to };
  const byDevice = Object.fromEntries((await devices(client, 'acme', range)).map((d) => [d.device, d.sessions]));
  t.same(
    byDevice,
    count(sessions, (s) => s.device),
    'devices: sessions',
  );

  const byRegion = Object.fromEntries((await geo(client, 'acme', range)).map((g) => [g.region, g.viewers]));
  const regions = [...new Set(sessions.map((s) => s.region))];
  t.same(
    byRegion,
    Object.fromEntries(regions.map((r) => [r, distinctViewers(sessions.filter((s) => s.region === r))])),
    'geo: viewers',
  );

  const byContent = Object.fromEntries(
    (await topContent(client, 'acme', range)).items.map((c) => [c.content_id, c.unique_viewers]),
  );
  const contents = [...new Set(sessions.map((s) => s.content))];
  t.same(
    byContent,
    Object.fromEntries(contents.map((c) => [c, distinctViewers(sessions.filter((s) => s.content === c))])),
    'top content: unique viewers',
  );

  const o = await overview(client, 'acme', range);
  const inWindow = (a: number, b: number): Spec[] => specs.filter((s) => inRange(s, a, b));
  t.equal(o.monthly_active_users, distinctViewers(inWindow(to - 30 * day, to)), 'overview: viewers of the 30 days');
  t.equal(
    o.wow_delta.mau,
    changePct(distinctViewers(inWindow(to - 7 * day, to)), distinctViewers(inWindow(to - 14 * day, to - 7 * day))),
    'overview: week over week',
  );
  t.not(distinctViewers(inWindow(to - 14 * day, to - 7 * day)), 0, 'the week before has viewers');
});
