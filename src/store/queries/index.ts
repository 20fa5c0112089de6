// One function per analytics answer (docs/metrics.md), read from the pipelines' snapshot tables.
export { devices } from './devices.js';
export { geo } from './geo.js';
export { overview } from './overview.js';
export { resolveRange, ranges, type Range, type RangeName } from './range.js';
export { topContent } from './top-content.js';
export type { ConcurrencySeries, DeviceItem, GeoItem, Interval, Overview, Paged, TopContentItem } from './answers.js';
