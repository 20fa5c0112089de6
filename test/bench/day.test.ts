import t from 'tap';
import { detect, wireOf } from '../../bench/simulator/detect.js';
import { dayAudience, incidentDay, steadyDay } from '../../bench/simulator/day.js';
import { Fleet } from '../../bench/simulator/fleet.js';
import { places } from '../../bench/simulator/world.js';

// The steady day of the detection benchmark (bench/detection.ts): its audience and levels, and, at a small scale,
// what the benchmark measures at a large one: a steady day raises no QoS or billing alert.

const hour = 3_600_000;

t.test('the audience of a day: a night trough, prime time at 21:00 IST', async (t) => {
  t.equal(dayAudience(21), 1);
  t.ok(dayAudience(4) < 0.1, 'the night');
  t.ok(dayAudience(13) > 0.3 && dayAudience(13) < 0.6, 'the day');
  t.equal(dayAudience(24 + 21), 1, 'a day repeats');
});

t.test("a weekend's double-header: a higher day, two matches, a wave at each toss and each end", async (t) => {
  t.equal(dayAudience(22.9, 'match'), 1, 'the peak in the evening chase');
  t.ok(dayAudience(13, 'match') > dayAudience(13), 'a weekend afternoon is watched more than a weekday one');
  t.ok(dayAudience(17.45, 'match') < dayAudience(17.1, 'match') - 0.1, 'the innings break');
  t.ok(dayAudience(19.25, 'match') < 0.7 * dayAudience(19, 'match'), 'a third leave within 15 minutes of the end');
  t.ok(dayAudience(20, 'match') > 1.5 * dayAudience(19.25, 'match'), 'and the evening match gathers them again');
  t.ok(dayAudience(23.25, 'match') < 0.5, 'the evening match ends');
  t.equal(dayAudience(0, 'match'), dayAudience(24, 'match'), 'a day repeats');
});

t.test('levels differ by place and minute, the same for the same seed, and blips stay short', async (t) => {
  const a = steadyDay({ seed: 3, noise: 0.15, blipsPerHour: 2, hours: 24 });
  const b = steadyDay({ seed: 3, noise: 0.15, blipsPerHour: 2, hours: 24 });
  const stall = (d: typeof a, minute: number, region: string) =>
    d.levels(minute * 60_000, region, places.find((p) => p.region === region)!.pops[0]!, 'mobile').stall;
  t.equal(stall(a, 100, 'Goa'), stall(b, 100, 'Goa'), 'seeded');
  t.not(stall(a, 100, 'Goa'), stall(a, 100, 'Kerala'), 'regions differ');
  t.not(stall(a, 100, 'Goa'), stall(a, 400, 'Goa'), 'and drift');
  const levels = places.map((p) => stall(a, 600, p.region));
  t.ok(Math.max(...levels) / Math.min(...levels) > 1.5, 'a spread worth detecting against');
  t.equal(a.blips.length, 48);
  t.ok(a.blips.every((x) => x.length <= 3 * 60_000 && x.factor < 1.6));
});

// The weekday's evening, and the match day's from the afternoon match's last overs through its end (a third of the
// audience leaving in 15 minutes) to the evening match's toss and first hour.
for (const [shape, from, clock] of [
  ['weekday', 18, '18:00'],
  ['match', 18.5, '18:30'],
] as const) {
  t.test(
    `two steady hours of the day simulator raise no QoS or billing alert: ${shape}, from ${clock} IST`,
    async (t) => {
      const startAt = Date.UTC(2026, 10, 23, 18, 30) + from * hour;
      const day = steadyDay({ seed: 2, noise: 0.15, blipsPerHour: 2, hours: 2 });
      const fleet = new Fleet({
        tenant: 'acme',
        viewers: 600,
        startAt,
        durationMs: 2 * hour,
        seed: 2,
        incidents: [],
        audience: (x) => dayAudience(from + 2 * x, shape),
        levels: day.levels,
      });
      const events = fleet.advance(startAt + 2 * hour + 60_000).flatMap((d) => {
        const last = Math.max(...d.events.map((e) => e.ts));
        return d.events.map((e) => wireOf(e, last + 300));
      });
      const { raised } = detect(events.sort((x, y) => x.received_at - y.received_at));
      t.same(
        raised.filter((r) => r.category !== 'content.new_release_detected').map((r) => `${r.category}: ${r.row.title}`),
        [],
      );
      t.equal(raised.length, 4, 'each title of the catalogue is new once');
    },
  );
}

t.test('the incident day: incidents and near misses of each kind, seeded, apart in one scope', async (t) => {
  const day = incidentDay({ seed: 4, hours: 24, perKind: 20, nearMisses: 10 });
  t.same(incidentDay({ seed: 4, hours: 24, perKind: 20, nearMisses: 10 }), day, 'seeded');
  for (const kind of ['rebuffer', 'startup', 'errors', 'payments'] as const) {
    const of = day.filter((i) => i.kind === kind);
    t.equal(of.filter((i) => !i.nearMiss).length, 20, `20 ${kind} incidents`);
    t.ok(of.filter((i) => i.nearMiss).length >= 5, `and near misses of ${kind}`);
  }
  const byScope = new Map<string, typeof day>();
  for (const i of day) {
    const scope = `${i.kind}/${i.region ?? ''}`;
    byScope.set(scope, [...(byScope.get(scope) ?? []), i]);
  }
  for (const [scope, list] of byScope) {
    const gap = (scope.startsWith('payments') ? 20 : 40) * 60_000;
    for (let k = 1; k < list.length; k++)
      t.ok(list[k]!.start >= list[k - 1]!.start + list[k - 1]!.length + gap, `${scope}: a clean baseline before each`);
  }
  t.ok(
    day.every((i) => i.start >= 40 * 60_000),
    'none before a baseline exists',
  );
});
