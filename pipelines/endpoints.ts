import type { ListEndpoint } from '../src/metric/endpoint.js';
import { bitrateEndpoint } from './bitrate/read.js';
import { qosEndpoint } from './qos/read.js';

/**
 * The analytics endpoints metrics declare in their folders (a metric's read side), served by the api role beside
 * the seed's own answers. A metric with an endpoint adds one line here.
 */
export const endpoints: readonly ListEndpoint<object>[] = [qosEndpoint, bitrateEndpoint];
