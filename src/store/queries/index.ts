// One function per analytics answer (docs/metrics.md): a metric's own in its folder under pipelines/, the answers that
// read several metrics' tables here.
export { devices } from '../../../pipelines/audience/read.js';
export { topContent } from '../../../pipelines/content/read.js';
export { geo } from './geo.js';
export { overview } from './overview.js';
export { resolveRange, ranges, type Range, type RangeName } from './range.js';
export type { ConcurrencySeries, DeviceItem, GeoItem, Interval, Overview, Paged, TopContentItem } from './answers.js';
