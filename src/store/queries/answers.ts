import {
  amountSchema as amount,
  countSchema as count,
  shareSchema as share,
  type FromSchema,
} from '../../metric/schema.js';
import { deviceItemSchema } from '../../../pipelines/audience/answer.js';
import { concurrencyPointSchema, concurrencySeriesSchema } from '../../../pipelines/concurrency/answer.js';
import { topContentItemSchema } from '../../../pipelines/content/answer.js';

export { intervals, isInterval, type ConcurrencySeries, type Interval } from '../../../pipelines/concurrency/answer.js';
export type { DeviceItem } from '../../../pipelines/audience/answer.js';
export type { TopContentItem } from '../../../pipelines/content/answer.js';

// The seed's analytics answers (docs/metrics.md) that read several metrics' tables, each as its JSON schema, the one description of it: the types are
// read from the schemas, and docs/openapi.json must hold them as written here (test/unit/openapi.test.ts). A module of
// schemas and types alone: the dashboard (src/dashboard/types.ts) and the test oracle read it without the store's code.

export const overviewSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['monthly_active_users', 'watch_hours', 'paid_subscribers', 'arpu_inr', 'churn_pct', 'wow_delta'],
  properties: {
    monthly_active_users: count,
    watch_hours: amount,
    paid_subscribers: count,
    arpu_inr: amount,
    churn_pct: amount,
    wow_delta: {
      type: 'object',
      additionalProperties: false,
      required: ['mau', 'watch_hours', 'subs', 'revenue'],
      properties: {
        mau: { type: 'number' },
        watch_hours: { type: 'number' },
        subs: { type: 'number' },
        revenue: { type: 'number' },
      },
    },
  },
} as const;

export const geoItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['region', 'watch_hours', 'viewers', 'share_pct'],
  properties: { region: { type: 'string' }, watch_hours: amount, viewers: count, share_pct: share },
} as const;

/** The seed's answers' schemas (a metric folder's own included) by their names in docs/openapi.json's `components.schemas`. */
export const answerSchemas = {
  Overview: overviewSchema,
  ConcurrencyPoint: concurrencyPointSchema,
  ConcurrencySeries: concurrencySeriesSchema,
  TopContentItem: topContentItemSchema,
  GeoItem: geoItemSchema,
  DeviceItem: deviceItemSchema,
} as const;

export type Overview = FromSchema<typeof overviewSchema>;
export type GeoItem = FromSchema<typeof geoItemSchema>;

/** A page of a list, and the length of the whole list (the API's `X-Total-Count`). */
export interface Paged<T> {
  items: T[];
  total: number;
}
