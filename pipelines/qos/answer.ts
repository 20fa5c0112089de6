import { countSchema as count, type FromSchema } from '../../src/metric/schema.js';

// The answer of GET /v1/analytics/qos (docs/metrics.md "QoS by region"). A module of a schema and types alone: the
// dashboard and the test oracle read it without the store's code.

export const qosItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'region',
    'watch_hours',
    'rebuffer_rate',
    'startups',
    'startup_p50_ms',
    'startup_p95_ms',
    'sessions_started',
    'fatal_sessions',
    'error_rate',
  ],
  properties: {
    region: { type: 'string' },
    watch_hours: { type: 'number', minimum: 0 },
    rebuffer_rate: { type: 'number', minimum: 0, maximum: 100, description: 'Rebuffering time / watch time × 100.' },
    startups: count,
    startup_p50_ms: {
      ...count,
      description: 'Upper bound of the 5 % bucket holding the median startup time; 0 without startups.',
    },
    startup_p95_ms: { ...count, description: 'The same for the 95th percentile.' },
    sessions_started: count,
    fatal_sessions: count,
    error_rate: { type: 'number', minimum: 0, description: 'Fatal sessions / sessions started × 100.' },
  },
} as const;

export type QosItem = FromSchema<typeof qosItemSchema>;
