import {
  amountSchema as amount,
  countSchema as count,
  shareSchema as share,
  type FromSchema,
} from '../../src/metric/schema.js';

// An item of GET /v1/analytics/top-content (docs/metrics.md "Top content"). A module of a schema and types alone: the
// dashboard and the test oracle read it without the store's code.

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

export type TopContentItem = FromSchema<typeof topContentItemSchema>;
