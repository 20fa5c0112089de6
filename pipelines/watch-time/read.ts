import { inRange, sumsIn, type Spans } from '../../src/store/queries/range.js';
import { watchTimeColumns as c, watchTimeMinutes } from './pipeline.js';

/**
 * The tenant's watch milliseconds in each of `spans` in one scan, each in the column of its name (docs/metrics.md
 * "Overview": the range's watch hours and the two weeks of `wow_delta`); `all` bounds the scan.
 */
export const watchMsIn = (spans: Spans, all: readonly [string, string]): string =>
  `SELECT ${sumsIn(spans, c.watch_ms, c.ts)}
  FROM ${watchTimeMinutes.name} WHERE ${c.tenant} = {tenant:String} AND ${inRange(c.ts, ...all)}`;
