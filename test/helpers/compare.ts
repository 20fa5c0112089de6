import type { ClickHouseClient } from '@clickhouse/client';
import type { Test } from 'tap';
import * as q from '../../src/store/queries/index.js';
import { Oracle, resolveRange, type OracleEvent, type Range } from './oracle.js';
import { post } from './env.js';
import type { Scenario } from './scenario.js';

/** Numbers to 9 significant digits: sums and means taken in another order differ in the last bits, nothing more. */
function settle(v: unknown): unknown {
  if (typeof v === 'number') return Number(v.toPrecision(9));
  if (Array.isArray(v)) return v.map(settle);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, settle(x)]));
  return v;
}

/** Send a scenario's batches as a client would, each with `sent_at` now so every `ts` is kept as given. */
export async function sendScenario(ingestUrl: string, scenario: Scenario, keys: Record<string, string>): Promise<void> {
  for (const b of scenario.batches) {
    const r = await post(`${ingestUrl}/v1/ingest/events`, { events: b.events, sent_at: new Date().toISOString() }, { 'x-api-key': keys[b.tenant]! });
    if (r.status !== 200 || r.body.rejected !== 0) throw new Error(`batch refused: ${r.status} ${JSON.stringify(r.body).slice(0, 400)}`);
  }
}

/** Every §6 answer of every tenant and range, from the store, against the oracle: equal number for number. */
export async function compareWithOracle(t: Test, client: ClickHouseClient, expected: readonly OracleEvent[], tenants: readonly string[]): Promise<void> {
  const oracle = new Oracle(expected);
  const now = Date.now();
  for (const tenant of tenants) {
    for (const range of ['24h', '7d', '30d', 'qtd'] as const satisfies readonly Range[]) {
      const r = q.resolveRange(range, now);
      t.same(r, resolveRange(range, now), `${tenant} ${range}: the same bounds`);
      t.same(settle(await q.overview(client, tenant, r)), settle(oracle.overview(tenant, range, now)), `${tenant} ${range}: overview`);
      t.same(settle(await q.topContent(client, tenant, r)), settle(oracle.topContent(tenant, range, now)), `${tenant} ${range}: top content`);
      t.same(settle(await q.geo(client, tenant, r)), settle(oracle.geo(tenant, range, now)), `${tenant} ${range}: geo`);
      t.same(settle(await q.devices(client, tenant, r)), settle(oracle.devices(tenant, range, now)), `${tenant} ${range}: devices`);
      for (const interval of range === '24h' ? [1, 5, 15, 60] : [15, 60]) {
        const got = await q.concurrencySeries(client, tenant, r, interval);
        const want = oracle.concurrency(tenant, range, interval, now);
        t.same(got, want, `${tenant} ${range}/${interval}m: concurrency (peak ${want.peak})`);
      }
    }
  }
}
