import t from 'tap';
import { stampTimes } from '../../src/ingest/timestamps.js';

const R = Date.parse('2026-11-21T12:00:00.000Z');
const at = (ms: number): string => new Date(ms).toISOString();

t.test('without sent_at: each event judged alone against the receive time', async (t) => {
  t.same(stampTimes([at(R - 30_000), at(R - 30_001), at(R + 30_000), at(R + 30_001), undefined], R, false, null), [
    { ts: R - 30_000, client_ts: R - 30_000 },
    { ts: R, client_ts: R - 30_001 },
    { ts: R + 30_000, client_ts: R + 30_000 },
    { ts: R, client_ts: R + 30_001 },
    { ts: R, client_ts: null },
  ]);
});

t.test('with sent_at: a skew over 30 s shifts the whole batch, keeping spacing', async (t) => {
  const sent = R - 3_600_000;
  t.same(stampTimes([at(sent - 20_000), at(sent - 10_000)], R, false, sent), [
    { ts: R - 20_000, client_ts: sent - 20_000 },
    { ts: R - 10_000, client_ts: sent - 10_000 },
  ]);
  t.same(
    stampTimes([at(R - 86_400_000)], R, false, R - 30_000),
    [{ ts: R - 86_400_000, client_ts: R - 86_400_000 }],
    'skew within tolerance: old events stay',
  );
  t.same(
    stampTimes([at(R + 90_000)], R, false, R + 60_000),
    [{ ts: R + 30_000, client_ts: R + 90_000 }],
    'a clock ahead shifts back',
  );
});

t.test('server_ts: every ts is the receive time, the sent one kept', async (t) => {
  t.same(stampTimes([at(R - 5), undefined], R, true, R - 999_999), [
    { ts: R, client_ts: R - 5 },
    { ts: R, client_ts: null },
  ]);
});
