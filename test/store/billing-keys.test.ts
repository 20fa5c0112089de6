import t from 'tap';
import { billingEvents } from '../../pipelines/billing.js';
import { snapshotTables } from '../../pipelines/index.js';
import { createLogger } from '../../src/log.js';
import { migrate, migrations } from '../../src/store/migrate.js';
import { overview } from '../../src/store/queries/index.js';
import { createTableSql, ensureSnapshotTables } from '../../src/store/snapshots.js';
import { embeddedClient } from '../helpers/store.js';

// Migration 6 gives `billing_events` rows of a store created before them their `user_key` and `sub_order`
// (pipelines/billing.ts); migration 8 computes `subscription_users` from them, and the overview's paid subscribers
// and churn read that: each user's latest subscription event before an instant, ties in rank order (docs/metrics.md
// "Overview").

const client = await embeddedClient(t, 'billing-keys');
const log = createLogger('silent');
const day = 86_400_000;
const to = Math.floor(Date.now() / 60_000) * 60_000 + 60_000;
const at = (ms: number): string => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

t.test('rows from before the columns get them, and paid subscribers and churn read them', async (t) => {
  await migrate(client, log, migrations.filter((m) => m.version < 6));
  // The table as a store created before migration 6 has it.
  await client.command({ query: createTableSql({ ...billingEvents, derived: [] }) });
  const rows: Array<[ms: number, user: string, kind: string]> = [
    // Paid through the whole month.
    [to - 40 * day, 'u1', 'subscription_started'],
    [to - 10 * day, 'u1', 'subscription_renewed'],
    // Cancelled in the range: paid at its start, not at its end.
    [to - 35 * day, 'u2', 'subscription_started'],
    [to - 2 * day, 'u2', 'subscription_cancelled'],
    // Started and cancelled at the same millisecond: cancelled ranks after started, so not paid.
    [to - 3 * day, 'u3', 'subscription_started'],
    [to - 3 * day, 'u3', 'subscription_cancelled'],
    // Expired before the range, renewed within it: paid at its end only.
    [to - 50 * day, 'u4', 'subscription_started'],
    [to - 45 * day, 'u4', 'subscription_expired'],
    [to - 1 * day, 'u4', 'subscription_renewed'],
    // After the range's end: not counted.
    [to + 60_000, 'u5', 'subscription_started'],
    // Payments are not subscription events: u6 has none, and u7's latest event is a payment, after its start.
    [to - 5 * day, 'u6', 'payment_succeeded'],
    [to - 20 * day, 'u7', 'subscription_started'],
    [to - 1 * day, 'u7', 'payment_succeeded'],
    // Renewed twice in the range: paid throughout, and a renewal is no churn.
    [to - 60 * day, 'u8', 'subscription_started'],
    [to - 25 * day, 'u8', 'subscription_renewed'],
    [to - 5 * day, 'u8', 'subscription_renewed'],
  ];
  await client.command({
    query: `INSERT INTO billing_events (tenant, ts, user_id, kind, amount_inr, plan) SETTINGS insert_deduplication_token = '' VALUES ${rows
      .map(([ms, user, kind]) => `('acme', '${at(ms)}', '${user}', '${kind}', ${kind === 'payment_succeeded' ? 199 : 0}, 'monthly')`)
      .join(', ')}`,
  });
  t.same(await migrate(client, log, migrations.filter((m) => m.version <= 6)), [6], 'migration 6 applied');
  const [keys] = await (
    await client.query({
      query: `SELECT countIf(user_key = reinterpretAsUInt128(sipHash128(user_id))) AS keyed,
        countIf(sub_order = toUInt64(toUnixTimestamp64Milli(ts)) * 8 + indexOf(['subscription_started', 'subscription_renewed', 'subscription_cancelled', 'subscription_expired'], kind)) AS ordered,
        countIf(sub_order % 8 = 0) AS payments, count() AS n FROM billing_events`,
      format: 'JSONEachRow',
    })
  ).json<Record<string, string>>();
  t.same(keys, { keyed: String(rows.length), ordered: String(rows.length), payments: '2', n: String(rows.length) }, 'every old row keyed and ordered');
  // Written into the old part, not computed at each read.
  const [stored] = await (
    await client.query({
      query: `SELECT groupUniqArray(column) AS columns FROM system.parts_columns WHERE database = currentDatabase() AND table = 'billing_events' AND active AND column IN ('user_key', 'sub_order')`,
      format: 'JSONEachRow',
    })
  ).json<{ columns: string[] }>();
  t.same(stored?.columns.sort(), ['sub_order', 'user_key'], 'stored in the parts');

  // Migration 8 computes `subscription_users`, which the overview reads, from these rows.
  t.same(await migrate(client, log, migrations.filter((m) => m.version <= 8)), [7, 8], 'migrations 7 and 8 applied');
  await ensureSnapshotTables(client, snapshotTables, 400);
  const o = await overview(client, 'acme', { from: to - 30 * day, to });
  t.equal(o.paid_subscribers, 4, 'u1, u4, u7 and u8 at the end');
  t.equal(o.churn_pct, (2 / 3) * 100, 'u2 and u3 cancelled in the range; u1, u2 and u8 were paid at its start');
  t.equal(o.arpu_inr, (2 * 199) / 4);
  t.equal(o.wow_delta.subs, 0, 'as many paid a week ago (u1, u2, u7, u8) as now (u1, u4, u7, u8)');
});
