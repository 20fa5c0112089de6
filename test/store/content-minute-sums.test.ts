import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { completionMinutes, contentMinuteSums, contentMinutes } from '../../pipelines/content.js';
import { snapshotTables } from '../../pipelines/index.js';
import type { Cell } from '../../src/aggregate/pipeline.js';
import { Bus } from '../../src/bus/bus.js';
import { encodeRows, frameOutput } from '../../src/bus/wire.js';
import { Flusher } from '../../src/flush/flusher.js';
import { createLogger } from '../../src/log.js';
import { migrate, migrations } from '../../src/store/migrate.js';
import { topContent } from '../../src/store/queries/index.js';
import { createTableSql, ensureSnapshotTables, insertSnapshotRows } from '../../src/store/snapshots.js';
import { Store } from '../../src/store/store.js';
import { eventually, natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';
import { embeddedClient } from '../helpers/store.js';

// `content_minute_sums` (pipelines/content.ts) took over `content_minutes` (watch time) and `completion_minutes`
// (completion), so top content reads one table. Pinned here: migration 9 copies a store's rows of both into it and
// migration 10 drops them, with top content's answer unchanged; and rows of the old tables still in the raw stream at
// an upgrade are written into it by the new flusher.

const log = createLogger('silent');
const minute = 60_000;
const day = 86_400_000;
const end = Math.floor(Date.now() / minute) * minute;
const m = (ms: number): number => Math.floor(ms / minute) * 60;

// Watch time of three contents, and completion sums: known (-1) and awaiting a published duration (at 1800 s).
const watchRows: Cell[][] = [
  ['acme', m(end - 3 * day), 'c1', 600_000],
  ['acme', m(end - 2 * day), 'c1', 300_000],
  ['acme', m(end - 2 * day), 'c2', 1_200_000],
  ['acme', m(end - day), 'c3', 60_000],
];
const completionRows: Cell[][] = [
  ['acme', m(end - 3 * day), 'c1', -1, 2, 150],
  ['acme', m(end - 2 * day), 'c2', 1800, 1, 0],
  ['acme', m(end - day), 'c3', -1, 1, 40],
];

t.test('migration 9 copies both tables into content_minute_sums, and top content answers the same', async (t) => {
  const client = await embeddedClient(t, 'content-minute-sums');
  await migrate(client, log, migrations.filter((x) => x.version < 9));
  // The tables as a store before migration 9 has them (the snapshot tables of that version).
  for (const table of [contentMinutes, completionMinutes]) await client.command({ query: createTableSql(table) });
  await insertSnapshotRows(client, contentMinutes, watchRows, 'old:watch');
  await insertSnapshotRows(client, completionMinutes, completionRows, 'old:completion');

  t.same(await migrate(client, log), [9, 10], 'migrations 9 and 10 applied');
  await ensureSnapshotTables(client, snapshotTables, 90);
  const tables = await (
    await client.query({ query: "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE '%minute%' ORDER BY name", format: 'JSONEachRow' })
  ).json<{ name: string }>();
  t.same(
    tables.map((x) => x.name),
    ['content_minute_sums', 'qos_minutes', 'quota_minutes', 'watch_time_minutes'],
    'the old tables are dropped',
  );
  const sums = await (
    await client.query({
      query: `SELECT content_id, furthest_sec, sum(watch_ms) AS w, sum(sessions) AS n, sum(completion_sum) AS c FROM content_minute_sums
        GROUP BY content_id, furthest_sec ORDER BY content_id, furthest_sec`,
      format: 'JSONEachRow',
    })
  ).json<Record<string, string | number>>();
  t.same(
    sums,
    [
      { content_id: 'c1', furthest_sec: -1, w: '900000', n: '2', c: 150 },
      { content_id: 'c2', furthest_sec: -1, w: '1200000', n: '0', c: 0 },
      { content_id: 'c2', furthest_sec: 1800, w: '0', n: '1', c: 0 },
      { content_id: 'c3', furthest_sec: -1, w: '60000', n: '1', c: 40 },
    ],
    'watch time under -1, completion under its furthest position',
  );
  const { items, total } = await topContent(client, 'acme', { from: end - 30 * day, to: end });
  t.equal(total, 3);
  t.same(
    items.map((i) => [i.content_id, i.watch_hours, i.completion_pct]),
    [
      ['c2', 1200_000 / 3_600_000, 0],
      ['c1', 900_000 / 3_600_000, 75],
      ['c3', 60_000 / 3_600_000, 40],
    ],
    'ordered by watch time; c2 has no published duration, so its one session has no completion',
  );
});

t.test('rows of the old tables in the raw stream at an upgrade are written into content_minute_sums', async (t) => {
  const prefix = uniquePrefix();
  const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
  t.teardown(async () => {
    await bus.close();
    await removeNamespace(prefix);
  });
  await bus.ensureStreams(1, 24);
  const dir = mkdtempSync(join(tmpdir(), 'darshak-retired-'));
  const store = await Store.open({ clickhouse_url: '', data_dir: dir, events_retention_days: 30 }, log);
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  // What an aggregator of the version before wrote: one message with rows of both old tables and of the new one.
  const message = frameOutput(
    [],
    [
      encodeRows(contentMinutes.name, watchRows),
      encodeRows(completionMinutes.name, completionRows),
      encodeRows(contentMinuteSums.name, [['acme', m(end - day), 'c3', -1, 5_000, 0, 0]]),
    ],
  );
  await bus.js.publish(bus.names.rawSubject(0), message);
  const flusher = new Flusher(bus, store, log);
  await flusher.start();
  t.teardown(() => flusher.stop());
  const read = async (): Promise<unknown[]> =>
    (await store.client.query({
      query: `SELECT content_id, toString(sum(watch_ms)) AS w, toString(sum(sessions)) AS n FROM content_minute_sums WHERE tenant = 'acme' GROUP BY content_id ORDER BY content_id`,
      format: 'JSONEachRow',
    }).then((r) => r.json())) as unknown[];
  const expected = [
    { content_id: 'c1', w: '900000', n: '2' },
    { content_id: 'c2', w: '1200000', n: '1' },
    { content_id: 'c3', w: '65000', n: '1' },
  ];
  t.not(await eventually(async () => JSON.stringify(await read()) === JSON.stringify(expected), 20_000), -1, 'written into the new table');
  t.same(await read(), expected);
});
