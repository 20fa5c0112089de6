import type { FromSchema } from '../../metric/schema.js';
import { concurrencyPointSchema, concurrencySeriesSchema } from '../../../pipelines/concurrency/answer.js';

export { intervals, isInterval, type ConcurrencySeries, type Interval } from '../../../pipelines/concurrency/answer.js';

// The seed's analytics answers (docs/metrics.md) that read several metrics' tables, each as its JSON schema, the one description of it: the types are
// read from the schemas, and docs/openapi.json must hold them as written here (test/unit/openapi.test.ts). A module of
// schemas and types alone: the dashboard (src/dashboard/types.ts) and the test oracle read it without the store's code.

const count = { type: 'integer', minimum: 0 } as const;
const amount = { type: 'number', minimum: 0 } as const;
const share = { type: 'number', minimum: 0, maximum: 100 } as const;

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

export const topContentItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['content_id', 'title', 'content_type', 'watch_hours', 'completion_pct', 'unique_viewers'],
  properties: {
    content_id: { type: 'string', minLength: 1 },
    title: { type: 'string' },
    content_type: { type: 'string', description: 'A content type of docs/ingest.md, or "" when no event named one.' },
    watch_hours: amount,
    completion_pct: share,
    unique_viewers: count,
  },
} as const;

export const geoItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['region', 'watch_hours', 'viewers', 'share_pct'],
  properties: { region: { type: 'string' }, watch_hours: amount, viewers: count, share_pct: share },
} as const;

export const deviceItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['device', 'sessions', 'share_pct'],
  properties: { device: { type: 'string' }, sessions: count, share_pct: share },
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
export type TopContentItem = FromSchema<typeof topContentItemSchema>;
export type GeoItem = FromSchema<typeof geoItemSchema>;
export type DeviceItem = FromSchema<typeof deviceItemSchema>;

/** A page of a list, and the length of the whole list (the API's `X-Total-Count`). */
export interface Paged<T> {
  items: T[];
  total: number;
}
