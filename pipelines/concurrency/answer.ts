import { countSchema as count, type FromSchema } from '../../src/metric/schema.js';

// The answer of GET /v1/analytics/concurrency (docs/metrics.md "Concurrency"). A module of a schema and types alone:
// the dashboard and the test oracle read it without the store's code.

export const concurrencyPointSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['ts', 'value'],
  properties: { ts: { type: 'string', format: 'date-time' }, value: count },
} as const;

/** Minutes per point of a concurrency series (the API's `interval`). */
export const intervals = [1, 5, 15, 60] as const;
export type Interval = (typeof intervals)[number];
export const isInterval = (n: number): n is Interval => (intervals as readonly number[]).includes(n);

export const concurrencySeriesSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['interval_minutes', 'points', 'peak', 'peak_at'],
  properties: {
    interval_minutes: { type: 'integer', enum: intervals },
    points: { type: 'array', items: concurrencyPointSchema },
    peak: count,
    peak_at: {
      type: 'string',
      format: 'date-time',
      description: 'First second of the peak; the range start when the peak is 0.',
    },
  },
} as const;

export type ConcurrencySeries = FromSchema<typeof concurrencySeriesSchema>;
