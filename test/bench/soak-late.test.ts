import t from 'tap';
import { Fleet } from '../../bench/simulator/fleet.js';
import { Oracle, type OracleEvent } from '../../bench/simulator/oracle.js';
import { Rng } from '../../bench/simulator/rng.js';
import { lateStalls } from '../../bench/soak/late.js';

// The soak sends a late stall for sessions of matches long over, so that aggregators recall them from the store. The
// stall must be one a player could have had: between two heartbeats, while it played, nothing else in between.

const minute = 60_000;
const startAt = Date.UTC(2026, 10, 1, 14, 0);
const fleet = new Fleet({ tenant: 'sim', viewers: 200, startAt, durationMs: 10 * minute, seed: 3, incidents: [] });
const events = fleet.advance(startAt + 20 * minute).flatMap((d) => d.events);

t.test('each stall falls while its session played, between two heartbeats with nothing else between', async (t) => {
  const pairs = lateStalls(events, new Rng(1), 10);
  t.equal(pairs.length, 10);
  t.equal(new Set(pairs.map((p) => p[0]!.session_id)).size, 10, 'ten sessions, one stall each');
  const ids = new Set(events.map((e) => e.event_id));
  for (const [start, end] of pairs) {
    t.same([start!.event_type, end!.event_type], ['rebuffer_start', 'rebuffer_end']);
    t.notOk(ids.has(start!.event_id) || ids.has(end!.event_id), 'new event ids');
    const session = events.filter((e) => e.session_id === start!.session_id).sort((a, b) => a.ts - b.ts);
    const before = session.filter((e) => e.ts < start!.ts).at(-1)!;
    const after = session.find((e) => e.ts > end!.ts)!;
    t.same([before.event_type, after.event_type], ['heartbeat', 'heartbeat'], 'between two heartbeats');
    t.equal(start!.context?.region, before.context?.region, 'the session’s context');
    t.equal(start!.content_id, before.content_id);
  }
});

t.test('the stalls add their time to rebuffering and nothing else', async (t) => {
  const pairs = lateStalls(events, new Rng(2), 25);
  const late: OracleEvent[] = pairs.flat();
  const q = (list: readonly OracleEvent[]) => new Oracle(list).qos('sim', startAt, startAt + 20 * minute);
  const [without, withLate] = [q(events), q([...events, ...late])];
  t.equal(withLate.rebuffering_sec - without.rebuffering_sec, pairs.length * 2, '2 s a stall');
  t.equal(withLate.watch_sec, without.watch_sec, 'watch time as before');
  t.equal(withLate.sessions_started, without.sessions_started);
});

t.test('the same seed picks the same stalls', async (t) => {
  t.same(lateStalls(events, new Rng(7), 5), lateStalls(events, new Rng(7), 5));
});
