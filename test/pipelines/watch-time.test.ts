import t from 'tap';
import { watchTime } from '../../pipelines/watch-time.js';
import { at, ev, feed } from '../helpers/pipeline.js';

const stallSession = [
  ev('play_start', 0),
  ev('first_frame', 2),
  ev('heartbeat', 12),
  ev('rebuffer_start', 20),
  ev('heartbeat', 30),
  ev('rebuffer_end', 75),
  ev('pause', 80),
  ev('resume', 200),
];

t.test('watch time per minute of the later event, gaps capped at 30 s, rebuffering counted apart', async (t) => {
  // 10:00 — 10 s (2→12) + 8 s (12→20) + 10 s rebuffering (20→30); 10:01 — 30 s rebuffering (30→75, capped) + 5 s.
  t.same(feed(watchTime, stallSession).watch_time_minutes, [
    [JSON.stringify(['acme', at(0)]), [28_000, 10_000]],
    [JSON.stringify(['acme', at(60)]), [35_000, 30_000]],
  ]);
});
