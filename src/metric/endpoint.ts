import type { ClickHouseClient } from '@clickhouse/client';
import type { Range } from '../store/queries/range.js';

/**
 * A metric's analytics endpoint, declared in its folder (pipelines/<metric>/read.ts) and served by the api role
 * (src/api/analytics-routes.ts): a list over a range, paged by `limit` and `offset`, each item described by `schema`
 * (its type is `FromSchema` of it, metric/schema.ts). docs/openapi.json must hold the operation and the item schema
 * as declared here; test/unit/openapi.test.ts compares them.
 */
export interface ListEndpoint<T> {
  path: `/v1/analytics/${string}`;
  operationId: string;
  summary: string;
  description: string;
  /** The item schema's name in docs/openapi.json's `components.schemas`. */
  itemName: string;
  /** What the items are, as the 200 answer's description says ("Regions."). */
  items: string;
  schema: object;
  list(client: ClickHouseClient, tenant: string, range: Range): Promise<T[]>;
}
