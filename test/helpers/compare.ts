import type { ClickHouseClient } from '@clickhouse/client';
import type { Test } from 'tap';
import * as q from '../../src/store/queries/index.js';
import { intervals, type Interval } from '../../src/store/queries/answers.js';
import { bitrateByRegionDevice } from '../../pipelines/bitrate/read.js';
import { concurrencySeries } from '../../pipelines/concurrency/read.js';
import { qosByRegion } from '../../pipelines/qos/read.js';
import { Oracle, resolveRange, type OracleEvent, type Range } from '../../bench/simulator/oracle.js';
import { awayFromMinuteEdge, settle } from '../../bench/simulator/report.js';
import { call } from './api.js';
import { post } from './env.js';
import type { Scenario } from './scenario.js';

/** Send a scenario's batches as a client would, each with `sent_at` now so every `ts` is kept as given. */
export async function sendScenario(ingestUrl: string, scenario: Scenario, keys: Record<string, string>): Promise<void> {
  for (const b of scenario.batches) {
    const r = await post(
      `${ingestUrl}/v1/ingest/events`,
      { events: b.events, sent_at: new Date().toISOString() },
      { 'x-api-key': keys[b.tenant]! },
    );
    if (r.status !== 200 || r.body.rejected !== 0)
      throw new Error(`batch refused: ${r.status} ${JSON.stringify(r.body).slice(0, 400)}`);
  }
}

/** Where the answers come from: the store's queries, or the API over HTTP. */
export interface Answers {
  overview(tenant: string, range: Range): Promise<unknown>;
  topContent(tenant: string, range: Range): Promise<unknown>;
  geo(tenant: string, range: Range): Promise<unknown>;
  devices(tenant: string, range: Range): Promise<unknown>;
  qos(tenant: string, range: Range): Promise<unknown>;
  bitrate(tenant: string, range: Range): Promise<unknown>;
  concurrency(tenant: string, range: Range, interval: Interval): Promise<unknown>;
}

export function storeAnswers(client: ClickHouseClient): Answers {
  const r = (range: Range) => q.resolveRange(range, Date.now());
  return {
    overview: (tenant, range) => q.overview(client, tenant, r(range)),
    topContent: async (tenant, range) => (await q.topContent(client, tenant, r(range))).items,
    geo: (tenant, range) => q.geo(client, tenant, r(range)),
    devices: (tenant, range) => q.devices(client, tenant, r(range)),
    qos: (tenant, range) => qosByRegion(client, tenant, r(range)),
    bitrate: (tenant, range) => bitrateByRegionDevice(client, tenant, r(range)),
    concurrency: (tenant, range, interval) => concurrencySeries(client, tenant, r(range), interval),
  };
}

/** The answers of the API at `base`, each tenant read with its own token (`tokens` by slug); lists asked in full. */
export function httpAnswers(base: string, tokens: Record<string, string>): Answers {
  const get = async (tenant: string, path: string): Promise<unknown> => {
    const r = await call(base, 'GET', path, { token: tokens[tenant]! });
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  return {
    overview: (tenant, range) => get(tenant, `/v1/analytics/overview?range=${range}`),
    topContent: (tenant, range) => get(tenant, `/v1/analytics/top-content?range=${range}&limit=200`),
    geo: (tenant, range) => get(tenant, `/v1/analytics/geo?range=${range}&limit=200`),
    devices: (tenant, range) => get(tenant, `/v1/analytics/devices?range=${range}`),
    qos: (tenant, range) => get(tenant, `/v1/analytics/qos?range=${range}&limit=200`),
    bitrate: (tenant, range) => get(tenant, `/v1/analytics/bitrate?range=${range}&limit=200`),
    concurrency: (tenant, range, interval) =>
      get(tenant, `/v1/analytics/concurrency?range=${range}&interval=${interval}`),
  };
}

/** Every §6 answer of every tenant and range against the oracle: equal number for number. */
export async function compareWithOracle(
  t: Test,
  answers: Answers,
  expected: readonly OracleEvent[],
  tenants: readonly string[],
): Promise<void> {
  const oracle = new Oracle(expected);
  for (const tenant of tenants) {
    for (const range of ['24h', '7d', '30d', 'qtd'] as const satisfies readonly Range[]) {
      const now = await awayFromMinuteEdge();
      t.same(q.resolveRange(range, now), resolveRange(range, now), `${tenant} ${range}: the same bounds`);
      t.same(
        settle(await answers.overview(tenant, range)),
        settle(oracle.overview(tenant, range, now)),
        `${tenant} ${range}: overview`,
      );
      t.same(
        settle(await answers.topContent(tenant, range)),
        settle(oracle.topContent(tenant, range, now)),
        `${tenant} ${range}: top content`,
      );
      t.same(
        settle(await answers.geo(tenant, range)),
        settle(oracle.geo(tenant, range, now)),
        `${tenant} ${range}: geo`,
      );
      t.same(
        settle(await answers.devices(tenant, range)),
        settle(oracle.devices(tenant, range, now)),
        `${tenant} ${range}: devices`,
      );
      t.same(
        settle(await answers.qos(tenant, range)),
        settle(oracle.qosByRegion(tenant, range, now)),
        `${tenant} ${range}: qos by region`,
      );
      t.same(
        settle(await answers.bitrate(tenant, range)),
        settle(oracle.bitrate(tenant, range, now)),
        `${tenant} ${range}: bitrate by region and device`,
      );
      for (const interval of range === '24h' ? intervals : ([15, 60] as const)) {
        const want = oracle.concurrency(tenant, range, interval, now);
        t.same(
          await answers.concurrency(tenant, range, interval),
          want,
          `${tenant} ${range}/${interval}m: concurrency (peak ${want.peak})`,
        );
      }
    }
  }
}
