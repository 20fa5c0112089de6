import type { ClickHouseClient } from '@clickhouse/client';
import t from 'tap';
import { pipelines, snapshotTables } from '../index.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import type { WireEvent } from '../../src/bus/wire.js';
import { topContent } from '../../src/store/queries/index.js';
import { ensureSnapshotTables, insertSnapshotRows } from '../../src/store/snapshots.js';
import { eventAt } from '../../test/helpers/pipeline.js';
import { embeddedClient } from '../../test/helpers/store.js';

// Top content's completion (docs/metrics.md "Top content"): the mean over the range's sessions, those that started in
// it read as sums per minute of start (`content_minute_sums`), those that started before it and run into it from
// `session_hours`. Sessions of every kind sit on both sides of the range's start: ended, with a duration of their
// own, with only the content's published duration (published after they played), with no duration at all; one is
// moved before the range's start by a late event, and positions keep moving over several flushes.

const client: ClickHouseClient = await embeddedClient(t, 'completion');

const minute = 60_000;
const hour = 60 * minute;
const h0 = Math.floor(Date.now() / hour) * hour - 30 * hour;
const from = h0 + 17 * minute;
const to = from + 26 * hour;

interface Spec {
  id: string;
  content: string;
  first: number;
  last: number;
  /** Furthest position, reached by the last event. */
  furthest: number;
  /** Own duration (sent with play_start), if any. */
  duration?: number;
  ended?: boolean;
}

const specs: Spec[] = [
  {
    id: 'ended-before-from',
    content: 'c1',
    first: from - 2 * hour,
    last: from + 10 * minute,
    furthest: 900,
    ended: true,
  },
  {
    id: 'own-before-from',
    content: 'c1',
    first: from - 40 * minute,
    last: from + 20 * minute,
    furthest: 1800,
    duration: 3600,
  },
  { id: 'published-before-from', content: 'c2', first: from - 5 * minute, last: from + 5 * minute, furthest: 600 },
  { id: 'none-before-from', content: 'c3', first: from - 5 * minute, last: from + 5 * minute, furthest: 600 },
  {
    id: 'ends-before-from',
    content: 'c1',
    first: from - 50 * minute,
    last: from - 1000,
    furthest: 3000,
    duration: 3600,
  },
  { id: 'ended-in', content: 'c1', first: from + hour, last: from + 2 * hour, furthest: 100, ended: true },
  { id: 'own-in', content: 'c1', first: from + 3 * hour, last: from + 4 * hour, furthest: 5000, duration: 3600 },
  { id: 'published-in', content: 'c2', first: from + 5 * hour, last: from + 6 * hour, furthest: 1200 },
  { id: 'published-in-far', content: 'c2', first: from + 7 * hour, last: from + 8 * hour, furthest: 9000 },
  { id: 'none-in', content: 'c3', first: from + 5 * hour, last: from + 6 * hour, furthest: 1200 },
  {
    id: 'late-start',
    content: 'c2',
    first: from - 3 * minute,
    last: from + 30 * minute,
    furthest: 300,
    duration: 1200,
  },
  { id: 'starts-at-to', content: 'c1', first: to, last: to + 10 * minute, furthest: 100, duration: 200 },
];
const published: Record<string, number> = { c2: 2400 };

function completionOf(s: Spec): number | null {
  if (s.ended) return 100;
  const d = s.duration ?? published[s.content];
  return d === undefined ? null : Math.min(100, (s.furthest / d) * 100);
}

function events(s: Spec): WireEvent[] {
  const base = { session_id: s.id, content_id: s.content, user_id: `u-${s.id}` };
  return [
    eventAt('play_start', s.first, { ...base, ...(s.duration ? { properties: { duration_sec: s.duration } } : {}) }),
    eventAt('first_frame', s.first + 2000, { ...base, position_sec: 0 }),
    eventAt('heartbeat', (s.first + s.last) / 2, { ...base, position_sec: s.furthest / 2 }),
    eventAt(s.ended ? 'ended' : 'heartbeat', s.last, { ...base, position_sec: s.furthest }),
  ];
}

t.test('completion over the sessions of the range, wherever they started', async (t) => {
  await ensureSnapshotTables(client, snapshotTables, 90);
  const agg = new Aggregation(pipelines, 86_400_000);
  let version = 0;
  const write = async (): Promise<void> => {
    const { rows } = agg.drain(++version);
    for (const table of snapshotTables)
      await insertSnapshotRows(client, table, rows.get(table.name) ?? [], `test:${version}:${table.name}`);
  };
  const late = specs.find((s) => s.id === 'late-start')!;
  const all = specs.flatMap(events);
  // The late session's play_start comes last; until then it seems to start after the range's start.
  const [held] = all.splice(
    all.findIndex((e) => e.session_id === late.id && e.event_type === 'play_start'),
    1,
  );
  for (const [i, e] of all.entries()) {
    agg.apply(e);
    if (i % 5 === 4) await write();
  }
  await write();
  agg.apply(held!);
  agg.apply(
    eventAt('content_published', to + hour, {
      content_id: 'c2',
      session_id: undefined,
      properties: { duration_sec: published.c2 },
    }),
  );
  await write();

  const inRange = specs.filter((s) => s.first < to && s.last >= from);
  t.same(
    inRange.map((s) => s.id),
    specs.filter((s) => !['ends-before-from', 'starts-at-to'].includes(s.id)).map((s) => s.id),
    'the sessions the range is meant to hold',
  );
  const expected: Record<string, number> = {};
  for (const c of ['c1', 'c2', 'c3']) {
    const known = inRange
      .filter((s) => s.content === c)
      .map(completionOf)
      .filter((x): x is number => x !== null);
    expected[c] = known.length === 0 ? 0 : known.reduce((a, b) => a + b, 0) / known.length;
  }
  const { items } = await topContent(client, 'acme', { from, to });
  const got = Object.fromEntries(items.map((i) => [i.content_id, i.completion_pct]));
  t.same(Object.keys(got).sort(), ['c1', 'c2', 'c3'], 'every content with a session in the range is listed');
  for (const c of ['c1', 'c2', 'c3']) t.ok(Math.abs(got[c]! - expected[c]!) < 1e-9, `${c}: ${got[c]} = ${expected[c]}`);
  // Completion is computed for a page's contents alone, with the published durations read with the page.
  for (const offset of [0, 1, 2]) {
    const page = await topContent(client, 'acme', { from, to }, 1, offset);
    t.same(
      page,
      { items: items.slice(offset, offset + 1), total: 3 },
      `a page of one at offset ${offset} (${items[offset]!.content_id}) as in the whole list`,
    );
  }
});
