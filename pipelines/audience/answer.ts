import { countSchema as count, shareSchema as share, type FromSchema } from '../../src/metric/schema.js';

// An item of GET /v1/analytics/devices (docs/metrics.md "Devices"). A module of a schema and types alone: the
// dashboard and the test oracle read it without the store's code.

export const deviceItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['device', 'sessions', 'share_pct'],
  properties: { device: { type: 'string' }, sessions: count, share_pct: share },
} as const;

export type DeviceItem = FromSchema<typeof deviceItemSchema>;
