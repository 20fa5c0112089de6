import t from 'tap';
import { audience } from './pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';

t.test('one row per session; a late earlier event sets its first values', async (t) => {
  const rows = feed(audience, [
    ev('heartbeat', 30, { region: 'Kerala', anonymous_id: 'anon-1', position_sec: 40 }),
    ev('ended', 60, { region: 'Kerala' }),
    // Late: the play_start, earlier than everything, from Goa, logged in.
    ev('play_start', 0, { region: 'Goa', user_id: 'u-9', content_id: 'm1', properties: { duration_sec: 100 } }),
  ]).session_hours!;
  t.equal(rows.length, 1);
  const [, row] = rows[0]!;
  const [tenant, hour, session, first, last, viewer, contentId, region, , , device, events, furthest, duration, ended] =
    row as unknown[];
  t.same(
    [tenant, hour, session, viewer, contentId, region, device, events, furthest, duration, ended],
    ['acme', at(0), 's1', 'u-9', 'm1', 'Goa', 'tv', 3, 40, 100, 1],
  );
  t.equal((last as number) - (first as number), 60_000);
});

t.test('a row for each UTC hour the span touches, all with the latest values', async (t) => {
  // 10:00 is a whole hour: 09:59:50 → 12:00:00 touches 09:00, 10:00, 11:00 and 12:00.
  const rows = feed(audience, [
    ev('play_start', -10, { user_id: 'u-1' }),
    ev('heartbeat', 3600),
    ev('heartbeat', 7200, { region: 'Kerala' }),
  ]).session_hours!;
  t.same(
    rows.map(([, row]) => (row as unknown[])[1]),
    [at(-3600), at(0), at(3600), at(7200)],
  );
  for (const [, row] of rows) {
    const r = row as unknown[];
    t.same(
      [r[3], r[4], r[5], r[7], r[11]],
      [at(-10) * 1000, at(7200) * 1000, 'u-1', 'Goa', 3],
      'each row carries the whole session',
    );
  }
});
