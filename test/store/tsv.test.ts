import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { snapshotTables } from '../../pipelines/index.js';
import type { Cell, ColumnType, TableSpec } from '../../src/metric/pipeline.js';
import type { WireEvent } from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { eventColumns, eventLine, insertEvents } from '../../src/store/events.js';
import { TsvLines } from '../../src/store/tsv.js';
import { createTableSql, insertSnapshotRows, rowColumns } from '../../src/store/snapshots.js';
import { Store } from '../../src/store/store.js';

// Rows reach the store as TabSeparated text. What a reader gets back must be what the JSON formats the store took
// before stored: every table, hostile strings, times to the millisecond, nulls and the map tables' arrays.

const log = createLogger('silent');
const dataDir = mkdtempSync(join(tmpdir(), 'darshak-tsv-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

let seed = 7;
const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
const hostile = [
  '',
  'plain',
  'tab\there',
  'line\nbreak',
  'back\\slash',
  'cr\rlf\r\n',
  'nul\0byte',
  'quote"\'`',
  '\\N',
  '\\t literally',
  'ड देवनागरी',
  '😀 astral',
  '\\',
  '\t',
  '\n',
];
const text = (): string => pick(hostile) + (random() < 0.5 ? pick(hostile) : '');
const ms = (): number => Date.UTC(2026, 10, 26) + Math.floor(random() * 86_400_000);

function cell(type: ColumnType): Cell {
  switch (type) {
    case 'String':
    case 'LowCardinality(String)':
      return text();
    case 'DateTime':
      return Math.floor(ms() / 1000);
    case 'DateTime64(3)':
      return ms();
    case 'Float64':
      return pick([0, -1, 1.5, 1e-7, 123_456.789, 1e21, -0.25]);
    case 'Nullable(Float64)':
      return random() < 0.3 ? null : pick([0, 2.5, 5400]);
    case 'Int64':
      return pick([0, -5, 9_007_199_254_740_991, -30_000]);
    case 'Array(UInt64)':
      return pick([[], [1], [3, 5, 2 ** 40]]);
    default:
      return Math.floor(random() * 200);
  }
}

function rowOf(table: TableSpec): Cell[] {
  if (!table.map) return [...table.key, ...table.values].map(([, type]) => cell(type));
  const n = 1 + Math.floor(random() * 4);
  const mapped = [table.key[table.key.length - 1]!, ...table.values];
  return [
    ...table.key.slice(0, -1).map(([, type]) => cell(type)),
    ...mapped.map(([, type]) => Array.from({ length: n }, () => cell(type) as number)),
  ];
}

async function all(store: Store, table: string, columns: readonly string[]): Promise<string[]> {
  const result = await store.client.query({
    query: `SELECT ${columns.map((c) => `\`${c}\``).join(', ')} FROM ${table}`,
    format: 'JSONCompactEachRow',
  });
  return (await result.text()).trim().split('\n').sort();
}

t.test('every snapshot table stores from TabSeparated what it stored from JSON', async (t) => {
  const store = await Store.open({ clickhouse_url: '', data_dir: dataDir, events_retention_days: 30 }, log);
  t.teardown(() => store.close());
  for (const table of snapshotTables) {
    const rows = Array.from({ length: 300 }, () => rowOf(table));
    const columns = rowColumns(table);
    const twin = `${table.name}_json_twin`;
    await store.client.command({ query: createTableSql({ ...table, name: twin }) });
    await store.client.insert({
      table: twin,
      values: rows,
      columns: columns as [string, ...string[]],
      format: 'JSONCompactEachRow',
    });
    await store.client.command({ query: `TRUNCATE TABLE ${table.name}` });
    await insertSnapshotRows(store.client, table, rows, `tsv-test:${table.name}`);
    const stored = await all(store, table.name, columns);
    // Summing and replacing tables merge rows of a key at insert: the count is the JSON twin's, checked below.
    t.ok(stored.length > rows.length / 2, `${table.name}: rows stored`);
    t.same(stored, await all(store, twin, columns), `${table.name}: the same rows as from JSON`);
  }
});

t.test('events store every field from TabSeparated as they stored from JSON', async (t) => {
  const store = await Store.open({ clickhouse_url: '', data_dir: dataDir, events_retention_days: 30 }, log);
  t.teardown(() => store.close());
  const events: WireEvent[] = Array.from({ length: 500 }, (_, i) => {
    const opt = (): string | undefined => (random() < 0.3 ? undefined : text());
    return {
      tenant: text(),
      env: pick(['production', 'staging', 'development'] as const),
      event_type: pick(['heartbeat', 'play_start', 'custom \t\n\\ type']),
      ts: ms(),
      client_ts: random() < 0.3 ? null : ms(),
      received_at: ms(),
      event_id: opt(),
      anonymous_id: opt(),
      user_id: opt(),
      session_id: opt(),
      content_id: opt(),
      content_type: opt(),
      content_title: opt(),
      position_sec: random() < 0.3 ? undefined : Math.floor(random() * 2_147_483_647),
      bitrate_kbps: random() < 0.3 ? undefined : Math.floor(random() * 10_000_000),
      country: text(),
      region: text(),
      device: text(),
      context:
        random() < 0.2
          ? undefined
          : {
              app_version: opt(),
              os: opt(),
              browser: opt(),
              player: opt(),
              cdn: opt(),
              pop: opt(),
              user_agent: opt(),
              ip: '10.0.0.1',
            },
      properties: random() < 0.3 ? undefined : { note: text(), n: i, nested: { a: [text(), 1.5, null, true] } },
      ingest_seq: i,
    } as WireEvent;
  });
  await store.client.command({ query: 'CREATE TABLE events_json_twin AS events' });
  const asJson = events.map((e, i) => {
    const c = e.context ?? {};
    const s = (v: string | undefined): string => v ?? '';
    return {
      tenant: e.tenant,
      env: e.env,
      event_type: e.event_type,
      ts: e.ts,
      client_ts: e.client_ts,
      received_at: e.received_at,
      event_id: s(e.event_id),
      anonymous_id: s(e.anonymous_id),
      user_id: s(e.user_id),
      session_id: s(e.session_id),
      content_id: s(e.content_id),
      content_type: s(e.content_type),
      content_title: s(e.content_title),
      position_sec: e.position_sec ?? null,
      bitrate_kbps: e.bitrate_kbps ?? null,
      country: e.country,
      region: e.region,
      device: e.device,
      app_version: s(c.app_version),
      os: s(c.os),
      browser: s(c.browser),
      player: s(c.player),
      cdn: s(c.cdn),
      pop: s(c.pop),
      user_agent: s(c.user_agent),
      properties: JSON.stringify(e.properties ?? {}),
      ingest_seq: 900 + i,
      ingest_index: i,
    };
  });
  await store.client.insert({ table: 'events_json_twin', values: asJson, format: 'JSONEachRow' });
  await insertEvents(store.client, TsvLines.of(events.map((e, i) => eventLine(e, 900 + i, i))), 'tsv-test:events');
  const stored = await all(store, 'events', eventColumns);
  t.equal(stored.length, events.length);
  t.same(stored, await all(store, 'events_json_twin', eventColumns));
});
