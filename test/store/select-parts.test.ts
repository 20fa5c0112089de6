import type { ClickHouseClient } from '@clickhouse/client';
import t from 'tap';
import { select, selectParts } from '../../src/store/queries/range.js';
import { embeddedClient } from '../helpers/store.js';

// Several queries of one answer run as one statement (selectParts): each part must come back exactly as its own query
// would, whatever its rows hold, and parts whose parameters share a name must each see their own value. And `select`
// itself gives rows exactly as JSONEachRow would.

const client: ClickHouseClient = await embeddedClient(t, 'select-parts');

await client.command({
  query: `CREATE TABLE things (tenant String, name String, n UInt64, big UInt128, x Float64, maybe Nullable(Float64), tags Array(String))
    ENGINE = MergeTree ORDER BY (tenant, name)`,
});
await client.insert({
  table: 'things',
  format: 'JSONEachRow',
  values: [
    { tenant: 'a', name: 'plain', n: 1, big: '340282366920938463463374607431768211455', x: 0.1, maybe: null, tags: [] },
    {
      tenant: 'a',
      name: 'quote " and \\ and \u0000 and टीवी',
      n: 18446744073709551615n.toString(),
      big: '1',
      x: -1e300,
      maybe: 2.5,
      tags: ['x', "y'z"],
    },
    { tenant: 'b', name: 'other tenant', n: 7, big: '0', x: 3, maybe: 1, tags: ['b'] },
  ],
});

const byTenant = 'SELECT name, n, big, x, maybe, tags FROM things WHERE tenant = {tenant:String} ORDER BY name';
const sum = 'SELECT count() AS rows, sum(n) AS total FROM things WHERE tenant = {tenant:String} AND n < {below:UInt64}';
const none = 'SELECT name FROM things WHERE tenant = {tenant:String}';

t.test('each part equals its own query, parameters apart', async (t) => {
  const parts = {
    a: { query: byTenant, params: { tenant: 'a' } },
    b: { query: byTenant, params: { tenant: 'b' } },
    sum: { query: sum, params: { tenant: 'a', below: 100 } },
    empty: { query: none, params: { tenant: 'nobody' } },
  };
  const got = await selectParts<Record<keyof typeof parts, object>>(client, parts);
  t.same(Object.keys(got).sort(), Object.keys(parts).sort(), 'every part, even one without rows');
  for (const [name, part] of Object.entries(parts)) {
    const alone = await select<object>(client, part.query, part.params);
    // Branches interleave, but each keeps its own order (`byTenant` orders by name).
    t.same(got[name as keyof typeof parts], alone, `${name}: ${alone.length} rows, as its own query returns them`);
  }
  t.equal(got.a.length, 2);
  t.equal(got.empty.length, 0);
  t.same(
    got.sum,
    [{ rows: '1', total: '1' }],
    'the part saw its own `below`, and 64-bit integers are written as ClickHouse writes them',
  );
});

t.test('select gives each row as JSONEachRow writes it, though it reads one JSONCompact document', async (t) => {
  const query = `SELECT name, n, big, x, maybe, tags, toDateTime64('2026-11-25 10:00:00.123', 3, 'UTC') AS at, tenant = {tenant:String} AS mine
    FROM things ORDER BY tenant, name`;
  const eachRow = await (
    await client.query({ query, query_params: { tenant: 'a' }, format: 'JSONEachRow' })
  ).json<object>();
  t.equal(eachRow.length, 3);
  t.strictSame(
    await select<object>(client, query, { tenant: 'a' }),
    eachRow,
    'the same keys, values and types, row by row',
  );
  t.strictSame(await select<object>(client, none, { tenant: 'nobody' }), [], 'no rows');
});

t.test('a bad part fails the whole statement with ClickHouse’s error', async (t) => {
  await t.rejects(
    selectParts(client, {
      ok: { query: none, params: { tenant: 'a' } },
      bad: { query: 'SELECT nope FROM things', params: {} },
    }),
    /nope/,
  );
});
