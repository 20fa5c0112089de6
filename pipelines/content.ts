import { minuteOf, type Pipeline, type TableSpec } from '../src/aggregate/pipeline.js';
import { watchMs } from './watch-time.js';

/** Watch time per content and minute. */
export const contentMinutes: TableSpec = {
  name: 'content_minutes',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
    ['content_id', 'String'],
  ],
  values: [['watch_ms', 'Int64']],
};

/** What events say about a content: its title, type and duration; `published` marks a content_published. */
export const contentCatalog: TableSpec = {
  name: 'content_catalog',
  engine: 'append',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['content_id', 'String'],
    ['ts', 'DateTime64(3)'],
  ],
  values: [
    ['published', 'UInt8'],
    ['title', 'String'],
    ['content_type', 'LowCardinality(String)'],
    ['duration_sec', 'Nullable(Float64)'],
  ],
};

export const content: Pipeline = {
  name: 'content',
  tables: [contentMinutes, contentCatalog],
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms === 0 || attrs.content_id === '') return;
    out.add(contentMinutes, [attrs.tenant, minuteOf(seg.to!), attrs.content_id], [sign * ms]);
  },
  event(e, out) {
    if (!e.content_id) return;
    const published = e.event_type === 'content_published';
    const d = e.properties?.duration_sec;
    const duration = published && typeof d === 'number' && d > 0 ? d : null;
    if (!published && !e.content_title && !e.content_type) return;
    out.append(contentCatalog, [e.tenant, e.content_id, e.ts, published ? 1 : 0, e.content_title ?? '', e.content_type ?? '', duration]);
  },
};
