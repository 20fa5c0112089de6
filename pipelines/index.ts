import type { Pipeline, TableSpec } from '../src/metric/pipeline.js';
import { audience } from './audience/pipeline.js';
import { billing } from './billing/pipeline.js';
import { bitrate } from './bitrate/pipeline.js';
import { concurrency } from './concurrency/pipeline.js';
import { content } from './content/pipeline.js';
import { qos } from './qos/pipeline.js';
import { quota } from './quota/pipeline.js';
import { viewers } from './viewers/pipeline.js';
import { watchTime } from './watch-time/pipeline.js';

/** Every pipeline the aggregator runs. A new metric is a new folder here and one line in this list. */
export const pipelines: readonly Pipeline[] = [
  concurrency,
  watchTime,
  qos,
  content,
  audience,
  viewers,
  billing,
  quota,
  bitrate,
];

export const snapshotTables: readonly TableSpec[] = pipelines.flatMap((p) => p.tables);
