import { minuteOf, type Pipeline, type TableSpec } from '../src/aggregate/pipeline.js';

/** Stored (de-duplicated) events per tenant and minute of arrival: monthly usage is a sum of these. */
export const quotaMinutes: TableSpec = {
  name: 'quota_minutes',
  engine: 'sum',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['ts', 'DateTime'],
  ],
  values: [['events', 'Int64']],
};

export const quota: Pipeline = {
  name: 'quota',
  tables: [quotaMinutes],
  event(e, out) {
    out.add(quotaMinutes, [e.tenant, minuteOf(e.received_at)], [1]);
  },
};
