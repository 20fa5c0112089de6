import t from 'tap';
import { watchTime } from './pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';

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

t.test('the cap is 30 s exactly, and a gap across a minute counts in the minute of its later event', async (t) => {
  const rows = feed(watchTime, [
    ev('play_start', 0),
    ev('first_frame', 1),
    ev('heartbeat', 31), // 30 s: all of it
    ev('heartbeat', 61.001), // 30.001 s: 30 s, in 10:01
    ev('ended', 70), // 8.999 s, in 10:01
  ]).watch_time_minutes;
  t.same(rows, [
    [JSON.stringify(['acme', at(0)]), [30_000, 0]],
    [JSON.stringify(['acme', at(60)]), [38_999, 0]],
  ]);
});

t.test('a late stall turns playing time into rebuffering, as if it had come on time', async (t) => {
  const onTime = [
    ev('play_start', 0),
    ev('first_frame', 2),
    ev('rebuffer_start', 10),
    ev('heartbeat', 20),
    ev('rebuffer_end', 25),
    ev('heartbeat', 35),
  ];
  const late = [onTime[0]!, onTime[1]!, onTime[3]!, onTime[5]!, onTime[4]!, onTime[2]!];
  // 2→10 playing 8 s; 10→20 and 20→25 rebuffering 15 s (the heartbeat keeps the stall); 25→35 playing 10 s.
  const want = [[JSON.stringify(['acme', at(0)]), [33_000, 15_000]]];
  t.same(feed(watchTime, onTime).watch_time_minutes, want);
  t.same(feed(watchTime, late).watch_time_minutes, want);
});

t.test('no watch time while starting, paused or closed, nor after the last event', async (t) => {
  t.same(
    feed(watchTime, [
      ev('play_start', 0),
      ev('first_frame', 20), // starting 0→20: not watch time
      ev('pause', 30), // playing 10 s
      ev('resume', 50), // paused 30→50: none
      ev('session_end', 55), // playing 5 s; then closed
    ]).watch_time_minutes,
    [[JSON.stringify(['acme', at(0)]), [15_000, 0]]],
  );
});
