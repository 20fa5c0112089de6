import t from 'tap';
import { concurrency } from './pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';

t.test('a session counts each second while active, up to 30 s after its last event', async (t) => {
  // starting 0–9 s, playing 10–19 s, paused from 20 s, playing again from 100 s: its last event, so 100–130 s.
  const rows = feed(concurrency, [
    ev('play_start', 0),
    ev('heartbeat', 10),
    ev('pause', 20),
    ev('resume', 100),
  ]).concurrency_seconds!;
  const seconds = rows.map(([k]) => (JSON.parse(k) as [string, number])[1]);
  const want = [...Array.from({ length: 20 }, (_, i) => at(i)), ...Array.from({ length: 31 }, (_, i) => at(100 + i))];
  t.same(seconds.sort(), want.sort());
  t.ok(
    rows.every(([, v]) => (v as number[])[0] === 1),
    'once each',
  );
});

t.test('a late pause cuts a run short; a closed session stops counting at its closing event', async (t) => {
  const rows = feed(concurrency, [
    ev('play_start', 0),
    ev('heartbeat', 10),
    ev('ended', 15),
    ev('pause', 5),
  ]).concurrency_seconds!;
  // Starting 0–4 s, paused 5–9 s, playing again at the heartbeat 10–14 s, closed at 15 s.
  t.same(rows.map(([k]) => (JSON.parse(k) as [string, number])[1]).sort(), [0, 1, 2, 3, 4, 10, 11, 12, 13, 14].map(at));
});

t.test('events within one second count it once; two sessions add up', async (t) => {
  const rows = feed(concurrency, [
    ev('play_start', 0.2),
    ev('first_frame', 0.7), // the same whole second: counted once
    ev('ended', 3),
    ev('play_start', 1, { session_id: 's2' }),
    ev('pause', 2.5, { session_id: 's2' }),
  ]).concurrency_seconds!;
  // s1: seconds 1, 2 (0.2 s is after second 0 starts, so 0 is not counted); s2: seconds 1, 2.
  t.same(
    rows.map(([k, v]) => [(JSON.parse(k) as [string, number])[1], (v as number[])[0]]),
    [
      [at(1), 2],
      [at(2), 2],
    ],
  );
});
