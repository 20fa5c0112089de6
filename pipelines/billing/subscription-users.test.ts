import type { ClickHouseClient } from '@clickhouse/client';
import t, { type Test } from 'tap';
import { Rng } from '../../bench/simulator/rng.js';
import { billingEvents, subscriptionUsers } from './pipeline.js';
import { snapshotTables } from '../index.js';
import type { Cell } from '../../src/metric/pipeline.js';
import type { WireEvent } from '../../src/bus/wire.js';
import { replayRange } from '../../src/flush/replay.js';
import { createLogger } from '../../src/log.js';
import { eventLine, insertEvents } from '../../src/store/events.js';
import { TsvLines } from '../../src/store/tsv.js';
import { migrate } from '../../src/store/migrate.js';
import { overview } from '../../src/store/queries/index.js';
import { changePct, type Range } from '../../src/store/queries/range.js';
import { ensureSnapshotTables, insertSnapshotRows, refreshDerived } from '../../src/store/snapshots.js';
import { embeddedClient } from '../../test/helpers/store.js';

// Paid subscribers and churn read `subscription_users` (pipeline.ts), which every insert into
// `billing_events` refreshes for the users it wrote. Pinned here: the overview's figures equal those of grouping
// `billing_events` by user (the query they replaced, kept below as the oracle), with events arriving late, in any
// order, twice, with equal timestamps, after a user's events are removed, and after a replay that drops some.

const client = await embeddedClient(t, 'subscription-users');
await migrate(client, createLogger('silent'));
await ensureSnapshotTables(client, snapshotTables, 400);

const minute = 60_000;
const day = 86_400_000;
const to = Math.floor(Date.now() / minute) * minute + minute;
const kinds = [
  'subscription_started',
  'subscription_renewed',
  'subscription_cancelled',
  'subscription_expired',
  'payment_succeeded',
] as const;

/** A row of `billing_events` as the billing pipeline emits it. */
const row = (tenant: string, ms: number, user: string, kind: string): Cell[] => [
  tenant,
  ms,
  user,
  kind,
  kind === 'payment_succeeded' ? 199 : 0,
  'monthly',
];

/** Per user, the latest subscription event before each instant, grouped from `billing_events`: what the overview read before. */
async function oracle(
  c: ClickHouseClient,
  tenant: string,
  r: Range,
): Promise<{ at_to: number; at_from: number; at_week1: number; churned: number }> {
  const result = await c.query({
    query: `SELECT countIf(at_to IN (1, 2)) AS at_to, countIf(at_from IN (1, 2)) AS at_from, countIf(at_week1 IN (1, 2)) AS at_week1, countIf(churned) AS churned FROM (
      SELECT max(sub_order) % 8 AS at_to, maxIf(sub_order, sub_order < {from:UInt64}) % 8 AS at_from, maxIf(sub_order, sub_order < {week1:UInt64}) % 8 AS at_week1,
        max(sub_order % 8 IN (3, 4) AND sub_order >= {from:UInt64}) AS churned
      FROM billing_events WHERE tenant = {tenant:String} AND sub_order % 8 != 0 AND sub_order < {to:UInt64} GROUP BY user_id)`,
    query_params: { tenant, to: r.to * 8, from: r.from * 8, week1: (r.to - 7 * day) * 8 },
    format: 'JSONEachRow',
  });
  const [o] = await result.json<Record<string, string>>();
  return {
    at_to: Number(o!.at_to),
    at_from: Number(o!.at_from),
    at_week1: Number(o!.at_week1),
    churned: Number(o!.churned),
  };
}

const ranges: Array<[string, Range]> = [
  ['30 days', { from: to - 30 * day, to }],
  ['24 hours', { from: to - day, to }],
  ['a quarter', { from: to - 90 * day, to }],
  ['ending a week ago', { from: to - 20 * day, to: to - 7 * day + 17 * minute }],
];

async function sameAsOracle(t: Test, tenant: string, when: string): Promise<void> {
  for (const [name, r] of ranges) {
    const o = await oracle(client, tenant, r);
    const got = await overview(client, tenant, r);
    t.same(
      { paid: got.paid_subscribers, churn: got.churn_pct, subs: got.wow_delta.subs },
      {
        paid: o.at_to,
        churn: o.at_from === 0 ? 0 : (o.churned / o.at_from) * 100,
        subs: changePct(o.at_to, o.at_week1),
      },
      `${when}, ${name}: paid ${o.at_to}, churned ${o.churned} of ${o.at_from}`,
    );
  }
}

const rowsOf = async (sql: string, params: Record<string, string> = {}): Promise<Array<Record<string, string>>> =>
  (await client.query({ query: sql, query_params: params, format: 'JSONEachRow' })).json<Record<string, string>>();

t.test(
  'the overview from subscription_users equals grouping billing_events by user, through late and repeated inserts',
  async (t) => {
    const rng = new Rng(7);
    const rows: Cell[][] = [];
    for (let u = 0; u < 300; u++) {
      const user = `user-${u}`;
      for (let i = rng.int(1, 5); i > 0; i--) {
        // Whole minutes, so some land on the same millisecond and only the kind's rank orders them; a few in the future.
        const ms = to - rng.int(0, 100 * 24 * 60) * minute + (rng.chance(0.02) ? 2 * minute : 0);
        rows.push(row('acme', ms, user, rng.pick(kinds)));
        if (rng.chance(0.05)) rows.push(row('acme', ms, user, rng.pick(kinds.slice(0, 4))));
      }
    }
    // In a shuffled order, in flushes of up to 40 rows: most users' events arrive late, across several flushes.
    for (let i = rows.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [rows[i], rows[j]] = [rows[j]!, rows[i]!];
    }
    for (let i = 0, flush = 0; i < rows.length; i += 40, flush++) {
      await insertSnapshotRows(client, billingEvents, rows.slice(i, i + 40), `test:acme:${flush}`);
      if (flush % 5 === 0) await sameAsOracle(t, 'acme', `after flush ${flush}`);
    }
    await sameAsOracle(t, 'acme', 'after every flush');

    // A flush written again (redelivered) stores nothing new and refreshes its users to the same rows.
    const before = await rowsOf(
      `SELECT user_key, orders FROM subscription_users FINAL WHERE tenant = 'acme' ORDER BY user_key`,
    );
    await insertSnapshotRows(client, billingEvents, rows.slice(0, 40), 'test:acme:0');
    t.same(
      await rowsOf(`SELECT user_key, orders FROM subscription_users FINAL WHERE tenant = 'acme' ORDER BY user_key`),
      before,
      'a redelivered flush changes nothing',
    );

    const [counts] = await rowsOf(
      `SELECT (SELECT count() FROM subscription_users FINAL WHERE tenant = 'acme') AS users,
      (SELECT uniqExact(user_id) FROM billing_events WHERE tenant = 'acme' AND kind != 'payment_succeeded') AS subscribed`,
    );
    t.equal(counts!.users, counts!.subscribed, 'a row for each user with a subscription event, none for payers alone');
  },
);

t.test('a user whose events are removed keeps a row that counts nowhere', async (t) => {
  await insertSnapshotRows(
    client,
    billingEvents,
    [
      row('gone', to - 3 * day, 'u1', 'subscription_started'),
      row('gone', to - 2 * day, 'u2', 'subscription_started'),
      row('gone', to - day, 'u2', 'subscription_cancelled'),
    ],
    'test:gone',
  );
  t.equal((await overview(client, 'gone', ranges[0]![1])).paid_subscribers, 1, 'u1 paid');
  // What a replay does when today's pipelines no longer write an event.
  await client.command({
    query: `DELETE FROM billing_events WHERE tenant = 'gone' AND user_id = 'u1'`,
    clickhouse_settings: { lightweight_deletes_sync: '2' },
  });
  await refreshDerived(client, subscriptionUsers, 'gone', ['u1']);
  t.equal((await overview(client, 'gone', ranges[0]![1])).paid_subscribers, 0, 'u1 no longer paid');
  t.same(
    await rowsOf(
      `SELECT orders FROM subscription_users FINAL WHERE tenant = 'gone' AND user_key = reinterpretAsUInt128(sipHash128('u1'))`,
    ),
    [{ orders: [] }],
    'its row holds no event',
  );
  await sameAsOracle(t, 'gone', 'after the removal');
});

t.test('a replay that no longer writes an event refreshes its user', async (t) => {
  const event = (ms: number, user: string, type: string): WireEvent => ({
    tenant: 'replayed',
    env: 'production',
    event_type: type,
    ts: ms,
    client_ts: ms,
    received_at: ms,
    event_id: `${user}-${type}-${ms}`,
    user_id: user,
    country: 'IN',
    region: 'Maharashtra',
    device: 'web',
    properties: { plan: 'monthly' },
  });
  // The raw events replay reads: u1 started 40 days ago; u2 started and renewed in the month.
  const raw = [
    event(to - 40 * day, 'u1', 'subscription_started'),
    event(to - 20 * day, 'u2', 'subscription_started'),
    event(to - 5 * day, 'u2', 'subscription_renewed'),
  ];
  await insertEvents(client, TsvLines.of(raw.map((e, i) => eventLine(e, 1, i))), 'test:replayed:raw');
  // What was stored from them, and a row no raw event supports any more (as if a pipeline's definition changed).
  await insertSnapshotRows(
    client,
    billingEvents,
    [
      ...raw.map((e) => row('replayed', e.ts, e.user_id!, e.event_type)),
      row('replayed', to - 10 * day, 'u3', 'subscription_started'),
    ],
    'test:replayed:rows',
  );
  const month = ranges[0]![1];
  t.equal((await overview(client, 'replayed', month)).paid_subscribers, 3, 'u1, u2 and u3 before the replay');
  await replayRange(client, { tenant: 'replayed', from: to - 15 * day, to });
  t.equal((await overview(client, 'replayed', month)).paid_subscribers, 2, 'u1 and u2 after it: u3 had no raw event');
  await sameAsOracle(t, 'replayed', 'after the replay');
});
