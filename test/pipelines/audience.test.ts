import t from 'tap';
import { audience } from '../../pipelines/audience.js';
import { ev, feed } from '../helpers/pipeline.js';

t.test('one row per session; a late earlier event sets its first values', async (t) => {
  const rows = feed(audience, [
    ev('heartbeat', 30, { region: 'Kerala', anonymous_id: 'anon-1', position_sec: 40 }),
    ev('ended', 60, { region: 'Kerala' }),
    // Late: the play_start, earlier than everything, from Goa, logged in.
    ev('play_start', 0, { region: 'Goa', user_id: 'u-9', content_id: 'm1', properties: { duration_sec: 100 } }),
  ]).sessions!;
  t.equal(rows.length, 1);
  const [, row] = rows[0]!;
  const [tenant, session, first, last, viewer, contentId, region, , , device, events, furthest, duration, ended] = row as unknown[];
  t.same([tenant, session, viewer, contentId, region, device, events, furthest, duration, ended], ['acme', 's1', 'u-9', 'm1', 'Goa', 'tv', 3, 40, 100, 1]);
  t.equal((last as number) - (first as number), 60_000);
});
