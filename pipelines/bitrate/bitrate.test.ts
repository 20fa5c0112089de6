import t from 'tap';
import { watchTime } from '../watch-time/pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';
import { bitrate, bucketOf } from './pipeline.js';

const row = (s: number, bucket: number, watchMs: number, kbpsMs: number): [string, number[]] => [
  JSON.stringify(['acme', at(s), 'Goa', 'tv', bucket]),
  [watchMs, kbpsMs],
];

t.test('buckets double from 500 kbps, 0 when no event said', async (t) => {
  t.same(
    [null, 0, 499, 500, 999, 1000, 3999, 4000, 15_999, 16_000, 80_000].map(bucketOf),
    [0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 7],
  );
});

t.test('watch time per bucket follows the rendition the segment played, unknown until an event says', async (t) => {
  const events = [
    ev('play_start', 0),
    ev('first_frame', 2),
    ev('heartbeat', 12),
    ev('bitrate_change', 20, { bitrate_kbps: 3000 }),
    ev('rebuffer_start', 30),
    ev('heartbeat', 40, { bitrate_kbps: 800 }),
    ev('pause', 50),
    ev('resume', 100),
    ev('heartbeat', 110),
  ];
  // 10:00: 10 s (2→12) + 8 s (12→20) unknown; 3000 kbps 10 s playing (20→30) + 10 s rebuffering (30→40), then
  // 800 kbps 10 s (40→50). 10:01: the pause is no watch time; 800 kbps again 10 s (100→110), inherited.
  t.same(feed(bitrate, events).bitrate_minutes, [
    row(0, 0, 18_000, 0),
    row(0, 2, 10_000, 8_000_000),
    row(0, 4, 20_000, 60_000_000),
    row(60, 2, 10_000, 8_000_000),
  ]);
});

t.test('a late bitrate moves the watch time that inherited the one before, and only that', async (t) => {
  const onTime = [
    ev('play_start', 0, { bitrate_kbps: 400 }),
    ev('first_frame', 1),
    ev('heartbeat', 11),
    ev('bitrate_change', 15, { bitrate_kbps: 1600 }),
    ev('heartbeat', 21),
    ev('heartbeat', 31, { bitrate_kbps: 16_000 }),
    ev('heartbeat', 41),
  ];
  const late = [...onTime.slice(0, 3), ...onTime.slice(4), onTime[3]!];
  t.same(feed(bitrate, late), feed(bitrate, onTime), 'the same rows, whichever came last');
  t.same(feed(bitrate, onTime).bitrate_minutes, [
    row(0, 1, 14_000, 5_600_000),
    row(0, 3, 16_000, 25_600_000),
    row(0, 7, 10_000, 160_000_000),
  ]);
});

t.test('two renditions at one instant: the higher counts after it, whatever the arrival order', async (t) => {
  const head = [ev('play_start', 0), ev('first_frame', 1)];
  const a = ev('bitrate_change', 5, { bitrate_kbps: 800 });
  const b = ev('bitrate_change', 5, { bitrate_kbps: 4500 });
  const tail = ev('heartbeat', 15);
  const rows = feed(bitrate, [...head, a, b, tail]).bitrate_minutes;
  t.same(feed(bitrate, [...head, b, a, tail]).bitrate_minutes, rows);
  t.same(feed(bitrate, [...head, tail, b, a]).bitrate_minutes, rows);
  t.same(rows, [row(0, 0, 4000, 0), row(0, 5, 10_000, 45_000_000)]);
});

t.test('the buckets of a minute add up to its watch time', async (t) => {
  const events = [
    ev('play_start', 0),
    ev('first_frame', 3),
    ev('bitrate_change', 9, { bitrate_kbps: 6000 }),
    ev('rebuffer_start', 50),
    ev('rebuffer_end', 95),
    ev('bitrate_change', 100, { bitrate_kbps: 700 }),
    ev('heartbeat', 140),
    ev('ended', 150),
  ];
  const perMinute = new Map<number, number>();
  for (const [key, [ms]] of feed(bitrate, events).bitrate_minutes as Array<[string, number[]]>) {
    const ts = (JSON.parse(key) as [string, number])[1];
    perMinute.set(ts, (perMinute.get(ts) ?? 0) + ms!);
  }
  const watch = feed(watchTime, events).watch_time_minutes as Array<[string, number[]]>;
  t.same(
    [...perMinute].sort(),
    watch.map(([key, [ms]]) => [(JSON.parse(key) as [string, number])[1], ms]),
  );
});
