// One function per analytics answer (docs/metrics.md), read from the pipelines' snapshot tables.
export { concurrencySeries, type ConcurrencySeries } from './concurrency.js';
export { devices, type DeviceItem } from './devices.js';
export { geo, type GeoItem } from './geo.js';
export { overview, type Overview } from './overview.js';
export { qosByRegion, type QosItem } from './qos.js';
export { resolveRange, ranges, type Range, type RangeName } from './range.js';
export { topContent, type TopContentItem } from './top-content.js';
