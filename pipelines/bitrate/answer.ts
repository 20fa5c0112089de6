import { amountSchema as hours, type FromSchema } from '../../src/metric/schema.js';

// The answer of GET /v1/analytics/bitrate (docs/metrics.md "Bitrate"). A module of a schema and types alone: the
// dashboard and the test oracle read it without the store's code.

const kbps = { type: ['integer', 'null'], minimum: 0 } as const;

export const bitrateItemSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['region', 'device', 'watch_hours', 'avg_bitrate_kbps', 'renditions'],
  properties: {
    region: { type: 'string' },
    device: { type: 'string' },
    watch_hours: hours,
    avg_bitrate_kbps: {
      type: ['number', 'null'],
      minimum: 0,
      description:
        'Mean bitrate weighted by watch time, over the watch time whose bitrate is known; null when none is.',
    },
    renditions: {
      type: 'array',
      description: 'Watch time per rendition bucket, in bucket order, "unknown" last; buckets without any left out.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['bucket', 'min_kbps', 'max_kbps', 'watch_hours', 'share_pct'],
        properties: {
          bucket: {
            enum: ['0-500', '500-1000', '1000-2000', '2000-4000', '4000-8000', '8000-16000', '16000+', 'unknown'],
          },
          min_kbps: { ...kbps, description: 'Lowest bitrate of the bucket; null for "unknown".' },
          max_kbps: { ...kbps, description: 'First bitrate above the bucket; null for "16000+" and "unknown".' },
          watch_hours: hours,
          share_pct: {
            type: 'number',
            minimum: 0,
            maximum: 100,
            description: "The bucket's watch time / the item's × 100.",
          },
        },
      },
    },
  },
} as const;

export type BitrateItem = FromSchema<typeof bitrateItemSchema>;
export type Rendition = BitrateItem['renditions'][number];
export type BucketName = Rendition['bucket'];
