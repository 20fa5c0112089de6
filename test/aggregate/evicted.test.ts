import t from 'tap';
import { Packr } from 'msgpackr';
import { EvictedSessions, evictedDays, sessionDigest } from '../../src/aggregate/evicted.js';

// The sessions a shard let go of, remembered for `evictedDays` days of its clock so a session that continues after a
// long pause is recalled from the store. Kept in checkpoints, so it must come back whole from one.

const day = 86_400_000;
const start = Date.UTC(2026, 10, 1);
const id = (i: number): string => `s${i}`;

t.test('remembers what left, for evictedDays days of the clock, and nothing else', async (t) => {
  const e = new EvictedSessions();
  for (let d = 0; d < 10; d++)
    for (let i = 0; i < 1000; i++) e.add('acme', id(d * 1000 + i), start + d * day + i * 1000);
  // Day 9 is today: the days a session left on are kept with the seven after them, so days 2 to 9.
  const kept = (d: number): boolean => d >= 9 - evictedDays;
  for (let d = 0; d < 10; d++) {
    const found = Array.from({ length: 1000 }, (_, i) => e.has('acme', id(d * 1000 + i))).filter(Boolean).length;
    t.equal(found, kept(d) ? 1000 : 0, `day ${d}: ${kept(d) ? 'every key' : 'none'}`);
  }
  t.equal(e.size, (evictedDays + 1) * 1000);
  const never = Array.from({ length: 20_000 }, (_, i) => e.has('acme', `new${i}`)).filter(Boolean).length;
  t.equal(never, 0, 'no session that never left is taken for one');
  t.notOk(e.has('globex', id(9000)), 'the same id of another tenant is another session');
  t.not(sessionDigest('a', 'bc'), sessionDigest('ab', 'c'), 'tenant and id are kept apart');
});

t.test('a checkpoint brings it back whole, and days go on from there', async (t) => {
  const e = new EvictedSessions();
  for (let i = 0; i < 500; i++) e.add('acme', id(i), start + Math.floor(i / 100) * day);
  // The bytes of a checkpoint, as the shard packs and reads them (not 8-byte aligned once unpacked).
  const codec = new Packr({ useRecords: false });
  const back = new EvictedSessions();
  back.load(
    (codec.unpack(codec.pack({ pad: 1, evicted: e.save() })) as { evicted: ReturnType<EvictedSessions['save']> })
      .evicted,
  );
  t.equal(back.size, 500);
  t.ok(Array.from({ length: 500 }, (_, i) => back.has('acme', id(i))).every(Boolean), 'every key');
  t.notOk(back.has('acme', id(500)));
  // Today (day 4) goes on being added to; the first day is kept through day 7 and forgotten on day 8.
  back.add('acme', id(600), start + 4 * day + 1);
  t.same(
    back.save().map(([d]) => d - Math.floor(start / day)),
    [0, 1, 2, 3, 4],
    'one entry per day',
  );
  back.add('acme', id(650), start + 7 * day);
  t.ok(back.has('acme', id(0)), 'day 0 kept on day 7');
  back.add('acme', id(700), start + 8 * day);
  t.notOk(back.has('acme', id(0)), 'day 0 forgotten on day 8');
  t.ok(back.has('acme', id(100)) && back.has('acme', id(600)) && back.has('acme', id(700)));
  const empty = new EvictedSessions();
  empty.load([]);
  t.equal(empty.size, 0);
});

t.test(
  'the filter in front lets few sessions that never left through to the exact check, however many are remembered',
  async (t) => {
    for (const n of [10, 100_000]) {
      const e = new EvictedSessions();
      for (let i = 0; i < n; i++) e.add('acme', id(i), start);
      t.equal(e.size, n);
      // What reaches the exact check shows as time only; the filter's own rate is read off its probes here.
      const filter = e as unknown as { mayHave(d: number): boolean };
      const passed = Array.from({ length: 100_000 }, (_, i) => filter.mayHave(sessionDigest('acme', `new${i}`))).filter(
        Boolean,
      ).length;
      t.ok(
        passed < 3000,
        `${n} remembered: ${passed} of 100,000 new sessions pass the filter (about 1.4 % expected at most)`,
      );
    }
  },
);
