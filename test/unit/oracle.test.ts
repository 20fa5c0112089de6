// Pins the test oracle (bench/simulator/oracle.ts) to docs/metrics.md on tiny examples whose numbers are worked out
// by hand in the comments, and checks the scenario generator (test/helpers/scenario.ts).
import t from 'tap';
import { Oracle, resolveRange, tieRank, type OracleEvent } from '../../bench/simulator/oracle.js';
import { makeScenario } from '../helpers/scenario.js';
import { validateEvent } from '../../src/ingest/validate.js';
import { stampTimes } from '../../src/ingest/timestamps.js';

const S = 1000;
const MIN = 60 * S;
const H = 60 * MIN;
const D = 24 * H;
const B = Date.parse('2026-11-21T10:00:00.000Z');
const iso = (ms: number): string => new Date(ms).toISOString();

let nextId = 0;
/** One event of `tenant`; `extra` adds fields (session_id, context, properties...). */
function ev(tenant: string, event_type: string, ts: number, extra: Partial<OracleEvent> = {}): OracleEvent {
  nextId++;
  return { tenant, ts, event_type, event_id: `00000000-0000-4000-8000-${String(nextId).padStart(12, '0')}`, ...extra };
}

/** Events of one session: `s('heartbeat', ts, {position_sec: 10})`. */
function sessionOf(tenant: string, session_id: string, common: Partial<OracleEvent> = {}) {
  return (event_type: string, ts: number, extra: Partial<OracleEvent> = {}): OracleEvent =>
    ev(tenant, event_type, ts, { session_id, ...common, ...extra });
}

interface Asserts {
  ok(value: unknown, message: string): boolean;
}

/** Floats computed in another order may differ in the last bits (0.3 × 100 = 30.000000000000004). */
function close(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
}

function near(t: Asserts, actual: number, expected: number, msg: string): void {
  t.ok(close(actual, expected), `${msg}: ${actual} ≈ ${expected}`);
}

/** Deep equality where numbers only need to be close. */
function approx(t: Asserts, actual: unknown, expected: unknown, msg: string): void {
  const same = (a: unknown, b: unknown): boolean => {
    if (typeof a === 'number' && typeof b === 'number') return close(a, b);
    if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
    if (
      a !== null &&
      b !== null &&
      typeof a === 'object' &&
      typeof b === 'object' &&
      !Array.isArray(a) &&
      !Array.isArray(b)
    ) {
      const ka = Object.keys(a).sort();
      const kb = Object.keys(b).sort();
      return (
        same(ka, kb) && ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
      );
    }
    return a === b;
  };
  t.ok(
    same(actual, expected),
    `${msg}\n  actual:   ${JSON.stringify(actual)}\n  expected: ${JSON.stringify(expected)}`,
  );
}

t.test('ranges: `to` is the start of the minute after now; qtd starts at the UTC quarter of now', async (t) => {
  const now = Date.parse('2026-11-21T10:05:17.345Z');
  const to = Date.parse('2026-11-21T10:06:00.000Z');
  t.same(resolveRange('24h', now), { from: Date.parse('2026-11-20T10:06:00.000Z'), to });
  t.same(resolveRange('7d', now), { from: Date.parse('2026-11-14T10:06:00.000Z'), to });
  t.same(resolveRange('30d', now), { from: Date.parse('2026-10-22T10:06:00.000Z'), to });
  t.same(resolveRange('qtd', now), { from: Date.parse('2026-10-01T00:00:00.000Z'), to });
  // On a minute boundary the minute under way still counts: 10:05:00.000 → to 10:06.
  t.equal(resolveRange('24h', Date.parse('2026-11-21T10:05:00.000Z')).to, to);
  // The quarter is that of now, even when `to` falls in the next one.
  t.same(resolveRange('qtd', Date.parse('2026-12-31T23:59:30.000Z')), {
    from: Date.parse('2026-10-01T00:00:00.000Z'),
    to: Date.parse('2027-01-01T00:00:00.000Z'),
  });
});

t.test('concurrency: 30 s timeout, active states, max per interval, peak', async (t) => {
  const now = B + 4 * MIN + 10 * S; // to = 10:05, from = 2026-11-20T10:05
  const { from } = resolveRange('24h', now);
  const a = sessionOf('c', 'A', { anonymous_id: 'a' });
  const b = sessionOf('c', 'B', { anonymous_id: 'b' });
  const c = sessionOf('c', 'C', { anonymous_id: 'c' });
  const d = sessionOf('c', 'D', { anonymous_id: 'd' });
  const e = sessionOf('c', 'E', { anonymous_id: 'e' });
  const events = [
    // A: starting from 0.5 s, playing from 2 s; last event 12 s → counts at whole seconds 1..42 (42 − 12 = 30 ≤ 30).
    a('play_start', B + 500),
    a('first_frame', B + 2 * S),
    a('heartbeat', B + 12 * S),
    // B: active 20..24, paused 25..69 (not active), playing 70..84, closed from 85.
    b('play_start', B + 20 * S),
    b('first_frame', B + 21 * S),
    b('pause', B + 25 * S),
    b('resume', B + 70 * S),
    b('heartbeat', B + 80 * S),
    b('session_end', B + 85 * S),
    // C: active only in the 3 minutes before `from`: in the hour point that holds `from`, but not in the range.
    c('play_start', from - 3 * MIN),
    c('first_frame', from - 3 * MIN + S),
    c('heartbeat', from - 3 * MIN + 11 * S),
    // D: rebuffering is active (120..124); a fatal error closes at 125.
    d('play_start', B + 120 * S),
    d('rebuffer_start', B + 121 * S),
    d('error', B + 125 * S, { properties: { code: 'X', fatal: true } }),
    // E: a non-fatal error keeps `starting`; last event 123 → counts 123..153.
    e('play_start', B + 122_300),
    e('error', B + 123 * S, { properties: { code: 'Y', fatal: false } }),
  ];
  const o = new Oracle(events);
  // Per second: 1..19 → 1 (A); 20..24 → 2 (A, B); 25..42 → 1 (A); 43..69 → 0; 70..84 → 1 (B); 85..119 → 0;
  // 120..122 → 1 (D); 123..124 → 2 (D, E); 125..153 → 1 (E); then 0.
  const bySecond = o.concurrencyBySecond('c', from, B + 5 * MIN);
  t.equal(bySecond.get(B), undefined, 'nobody at 10:00:00 (A starts at .500)');
  t.equal(bySecond.get(B + S), 1);
  t.equal(bySecond.get(B + 20 * S), 2);
  t.equal(bySecond.get(B + 25 * S), 1, 'B paused');
  t.equal(bySecond.get(B + 42 * S), 1, 'exactly 30 s after A’s last event');
  t.equal(bySecond.get(B + 43 * S), undefined, '31 s after: timed out');
  t.equal(bySecond.get(B + 123 * S), 2);
  t.equal(bySecond.get(B + 125 * S), 1, 'D closed by its fatal error, E still starting');
  t.equal(bySecond.get(B + 153 * S), 1);
  t.equal(bySecond.get(B + 154 * S), undefined);

  // 1-minute points: 10:00 → max(2 at 20 s, ...) = 2; 10:01 → 1 (B 70..84); 10:02 → 2 (123..124); 10:03, 10:04 → 0.
  const one = o.concurrency('c', '24h', 1, now);
  t.equal(one.points.length, 1440, '2026-11-20T10:05 … 2026-11-21T10:04');
  t.equal(one.points[0]?.ts, '2026-11-20T10:05:00.000Z');
  t.same(one.points.slice(-5), [
    { ts: '2026-11-21T10:00:00.000Z', value: 2 },
    { ts: '2026-11-21T10:01:00.000Z', value: 1 },
    { ts: '2026-11-21T10:02:00.000Z', value: 2 },
    { ts: '2026-11-21T10:03:00.000Z', value: 0 },
    { ts: '2026-11-21T10:04:00.000Z', value: 0 },
  ]);
  t.equal(one.points.slice(0, -5).filter((p) => p.value !== 0).length, 0, 'C is before the range');
  t.equal(one.peak, 2);
  t.equal(one.peak_at, '2026-11-21T10:00:20.000Z', 'the first second at the peak (10:02:03 reaches it again)');
  t.equal(one.interval_minutes, 1);

  // 60-minute points start at multiples of an hour: the first holds `from` (10:05) and starts at 10:00, so it
  // includes C's seconds before `from`... which are outside the range and do not count.
  const hour = o.concurrency('c', '24h', 60, now);
  t.equal(hour.points.length, 25, '2026-11-20T10:00 … 2026-11-21T10:00');
  t.same(hour.points[0], { ts: '2026-11-20T10:00:00.000Z', value: 0 });
  t.same(hour.points[24], { ts: '2026-11-21T10:00:00.000Z', value: 2 });
  t.equal(hour.peak_at, '2026-11-21T10:00:20.000Z');

  // Nobody at all: every point 0, peak 0 at `from`.
  const none = o.concurrency('nobody', '24h', 5, now);
  t.equal(none.points.length, 288);
  t.ok(none.points.every((p) => p.value === 0));
  t.equal(none.peak, 0);
  t.equal(none.peak_at, iso(from));
});

t.test('watch time: 30 s cap, rebuffering, a heartbeat keeps a stall open', async (t) => {
  const now = B + 10 * MIN;
  const w = sessionOf('w', 'W', { anonymous_id: 'v' });
  const o = new Oracle([
    w('play_start', B), //                    starting (not watch time until first_frame)
    w('first_frame', B + 1 * S), //           playing
    w('heartbeat', B + 11 * S), //            +10 s   (playing)
    w('rebuffer_start', B + 15 * S), //       +4 s    (playing)
    w('heartbeat', B + 25 * S), //            +10 s, rebuffering 10 s; the heartbeat keeps `rebuffering`
    w('rebuffer_end', B + 28 * S), //         +3 s, rebuffering 3 s
    w('heartbeat', B + 88 * S), //            +30 s   (60 s gap, capped)
    w('pause', B + 90 * S), //                +2 s
    w('resume', B + 150 * S), //              +0      (paused)
    w('ended', B + 160_500), //               +10.5 s
    w('session_end', B + 161 * S), //         +0      (closed)
  ]);
  // Watch: 10 + 4 + 10 + 3 + 30 + 2 + 10.5 = 69.5 s; rebuffering: 10 + 3 = 13 s (7 s if the heartbeat had ended
  // the stall).
  const q = o.qos('w', B - H, B + H);
  t.equal(q.watch_sec, 69.5);
  t.equal(q.rebuffering_sec, 13);
  near(t, q.rebuffer_rate, (13 / 69.5) * 100, 'rebuffer rate 18.705…%');
  t.same(q.startup_ms, [1000], 'first_frame − play_start');
  t.equal(q.sessions_started, 1);
  t.equal(q.fatal_sessions, 0);
  near(t, o.overview('w', '24h', now).watch_hours, 69.5 / 3600, 'watch_hours');

  // Attribution to the instant of the second event, at the range start F (24h: to = 10:11, F = 2026-11-20T10:11).
  const { from: F } = resolveRange('24h', now);
  const x = sessionOf('x', 'X', { anonymous_id: 'v' });
  const o2 = new Oracle([
    x('first_frame', F - 40 * S),
    x('heartbeat', F - 20 * S), //   20 s at F − 20 s: before the range
    x('heartbeat', F), //            20 s at F: in it ([from, to) includes from)
    x('heartbeat', F + 10 * S), //   10 s
  ]);
  near(t, o2.overview('x', '24h', now).watch_hours, 30 / 3600, '24h: 20 + 10 s');
  near(t, o2.overview('x', '7d', now).watch_hours, 50 / 3600, '7d: all 50 s');
});

t.test('tie order at equal ts, whatever the input order', async (t) => {
  const now = B + 10 * MIN;
  const s = sessionOf('tie', 'T', { anonymous_id: 'v' });
  const events = [
    s('play_start', B),
    s('first_frame', B + 1 * S),
    s('pause', B + 11 * S), //        given before the heartbeat of the same ts...
    s('heartbeat', B + 11 * S), //    ...but ranked first: heartbeat, then pause → paused
    s('resume', B + 71 * S),
    s('heartbeat', B + 81 * S),
    s('ended', B + 91 * S), //        ranked after the heartbeat of the same ts → closed
    s('heartbeat', B + 91 * S),
    s('session_end', B + 95 * S),
  ];
  // Watch: ff→hb 10 s, hb→pause 0 s, paused until resume, resume→hb 10 s, hb→hb 10 s, hb→ended 0 s = 30 s.
  // (Arrival order would give hb→resume 30 s capped and a heartbeat after `ended`: 60 s.)
  for (const list of [events, [...events].reverse()]) {
    const o = new Oracle(list);
    near(t, o.overview('tie', '24h', now).watch_hours, 30 / 3600, 'watch_hours');
    const c = o.concurrencyBySecond('tie', B - H, B + H);
    t.equal(c.get(B), 1, 'starting at 10:00:00');
    t.equal(c.get(B + 10 * S), 1);
    t.equal(c.get(B + 11 * S), undefined, 'paused at 11 s');
    t.equal(c.get(B + 70 * S), undefined);
    t.equal(c.get(B + 71 * S), 1);
    t.equal(c.get(B + 90 * S), 1);
    t.equal(c.get(B + 91 * S), undefined, 'closed at 91 s');
  }

  // The full rank, from docs/metrics.md "Order".
  const kinds: Array<[string, Partial<OracleEvent>]> = [
    ['play_start', {}],
    ['rebuffer_start', {}],
    ['first_frame', {}],
    ['resume', {}],
    ['seek_start', {}],
    ['seek_end', {}],
    ['rebuffer_end', {}],
    ['heartbeat', {}],
    ['bitrate_change', {}],
    ['error', { properties: { fatal: false } }],
    ['pause', {}],
    ['error', { properties: { fatal: true } }],
    ['ended', {}],
    ['session_end', {}],
  ];
  t.same(
    kinds.map(([type, extra]) => tieRank(ev('r', type, B, extra))),
    kinds.map((_, i) => i),
  );
  t.equal(
    tieRank(ev('r', 'error', B, {})),
    tieRank(ev('r', 'error', B, { properties: { fatal: false } })),
    'no `fatal`: non-fatal',
  );
});

t.test('top content: completion with ended and durations, titles, viewers, order', async (t) => {
  const now = B + 10 * MIN;
  const sess = (id: string, content_id: string, who: Partial<OracleEvent>) =>
    sessionOf('tc', id, { content_id, ...who });
  const s0 = sess('s0', 'k1', { user_id: 'u9' });
  const s1 = sess('s1', 'k1', { user_id: 'u1' });
  const s2 = sess('s2', 'k1', { user_id: 'u1', anonymous_id: 'a9' });
  const s3 = sess('s3', 'k1', { anonymous_id: 'a3' });
  const s4 = sess('s4', 'k1', { user_id: 'u2' });
  const s5 = sess('s5', 'k2', { anonymous_id: 'a5' });
  const s6 = sess('s6', 'k2', { anonymous_id: 'a6' });
  const s7 = sess('s7', 'k3', { anonymous_id: 'a7' });
  const pub = (ts: number, id: string, title: string, duration: number): OracleEvent =>
    ev('tc', 'content_published', ts, {
      content_id: id,
      content_title: title,
      content_type: 'movie',
      properties: { duration_sec: duration },
    });
  const o = new Oracle([
    pub(B - 30 * D, 'k1', 'Old', 1000),
    pub(B - 2 * D, 'k1', 'New', 2000), // the latest: title "New", duration 2000
    pub(B - 2 * D, 'k4', 'Unwatched', 100), // no session: not listed
    // Before the range: reached ended, but not one of "its sessions in the range".
    s0('play_start', B - 2 * D),
    s0('first_frame', B - 2 * D + S),
    s0('ended', B - 2 * D + 11 * S),
    // s1: duration from its play_start (500), furthest 250 → 50 %.
    s1('play_start', B, { properties: { duration_sec: 500 } }),
    s1('first_frame', B + 1 * S),
    s1('heartbeat', B + 11 * S, { position_sec: 250 }),
    // s2: no duration on play_start → latest content_published (2000); furthest 500 → 25 %.
    s2('play_start', B + 20 * S),
    s2('first_frame', B + 21 * S),
    s2('heartbeat', B + 31 * S, { position_sec: 500 }),
    // s3: reached ended → 100 %, whatever its position.
    s3('play_start', B + 40 * S),
    s3('first_frame', B + 41 * S),
    s3('ended', B + 51 * S, { position_sec: 100 }),
    // s4: furthest 900 of 500 → min(100, 180) = 100 %.
    s4('play_start', B + 60 * S, { properties: { duration_sec: 500 } }),
    s4('first_frame', B + 61 * S),
    s4('heartbeat', B + 71 * S, { position_sec: 900 }),
    // k2: never published, no duration, never ended → both sessions left out of the mean → 0.
    s5('play_start', B + 100 * S, { content_title: 'K2 v1', content_type: 'clip' }),
    s5('first_frame', B + 101 * S),
    s5('heartbeat', B + 111 * S, { position_sec: 30 }),
    s6('play_start', B + 200 * S, { content_title: 'K2 v2' }),
    s6('first_frame', B + 201 * S),
    s6('heartbeat', B + 211 * S, { position_sec: 40 }),
    // k3: no title or type anywhere; ended → 100 %; 20 s of watch time, as k2.
    s7('play_start', B + 300 * S),
    s7('first_frame', B + 301 * S),
    s7('heartbeat', B + 311 * S),
    s7('ended', B + 321 * S, { position_sec: 5 }),
  ]);
  approx(
    t,
    o.topContent('tc', '24h', now),
    [
      // 4 sessions × 10 s; (50 + 25 + 100 + 100) / 4 = 68.75; viewers u1 (s1, s2), a3, u2.
      {
        content_id: 'k1',
        title: 'New',
        content_type: 'movie',
        watch_hours: 40 / 3600,
        completion_pct: 68.75,
        unique_viewers: 3,
      },
      // 2 × 10 s; title from the latest event carrying one (s6), type from the latest carrying one (s5).
      {
        content_id: 'k2',
        title: 'K2 v2',
        content_type: 'clip',
        watch_hours: 20 / 3600,
        completion_pct: 0,
        unique_viewers: 2,
      },
      // Same watch time as k2: ordered by content_id.
      { content_id: 'k3', title: '', content_type: '', watch_hours: 20 / 3600, completion_pct: 100, unique_viewers: 1 },
    ],
    'top content',
  );
});

t.test('subscribers, ARPU and churn', async (t) => {
  const now = B + 10 * MIN + 30 * S;
  const Z = B + 11 * MIN; // to
  const F = Z - D; // from (24h)
  const sub = (type: string, ts: number, user: string): OracleEvent =>
    ev('bill', type, ts, { user_id: user, properties: { plan: 'p', amount_inr: 1 } });
  const pay = (type: string, ts: number, user: string, amount: number): OracleEvent =>
    ev('bill', type, ts, { user_id: user, properties: { amount_inr: amount } });
  const o = new Oracle([
    sub('subscription_started', Z - 40 * D, 'u1'),
    sub('subscription_renewed', Z - 10 * D, 'u1'),
    pay('payment_failed', Z - 1 * H, 'u1', 999), // failed: no revenue
    sub('subscription_started', Z - 5 * D, 'u2'),
    sub('subscription_cancelled', Z - 2 * H, 'u2'),
    sub('subscription_started', Z - 3 * H, 'u3'),
    pay('payment_succeeded', Z - 3 * H + 5 * S, 'u3', 299),
    sub('subscription_started', Z - 20 * D, 'u4'),
    sub('subscription_expired', Z - 30 * H, 'u4'),
    sub('subscription_started', Z - 10 * D, 'u5'),
    sub('subscription_cancelled', Z - 12 * H, 'u5'),
    sub('subscription_started', Z - 6 * H, 'u5'),
    pay('payment_succeeded', Z - 6 * H + 5 * S, 'u5', 149),
    sub('subscription_started', F, 'u6'), // exactly at `from`: not yet a subscriber "at from"
    pay('payment_succeeded', F, 'u6', 649),
    pay('payment_succeeded', Z - 1 * H, 'u7', 79), // a rental: revenue, not a subscriber
    pay('payment_succeeded', F - 1, 'u8', 1000), // 1 ms before the 24h range
  ]);
  // At `to`, latest event started/renewed: u1 (renewed), u3, u5 (started again), u6 → 4.
  // At `from` (strictly before it): u1, u2 (started Z−5d), u5 (started Z−10d) → 3; u4 expired, u6 not yet.
  // 24h: revenue 299 + 149 + 649 + 79 = 1176 → ARPU 1176 / 4 = 294; churned u2, u5 → 2 / 3 × 100 = 66.67 %.
  const day = o.overview('bill', '24h', now);
  t.equal(day.paid_subscribers, 4);
  t.equal(day.arpu_inr, 294);
  near(t, day.churn_pct, 200 / 3, 'churn 24h');
  // 7d: from = Z − 7d; subscribers then: u1, u4 (expires later), u5 → 3; churned u2, u4, u5 → 100 %.
  // Revenue adds u8's 1000: 2176 / 4 = 544.
  const week = o.overview('bill', '7d', now);
  t.equal(week.paid_subscribers, 4);
  t.equal(week.arpu_inr, 544);
  t.equal(week.churn_pct, 100);
  // No subscriber at all: ARPU and churn are 0, not NaN.
  const empty = new Oracle([pay('payment_succeeded', Z - H, 'u1', 10)]).overview('bill', '24h', now);
  t.same([empty.paid_subscribers, empty.arpu_inr, empty.churn_pct], [0, 0, 0]);
});

t.test('monthly active users and wow_delta', async (t) => {
  const now = B + 10 * MIN;
  const Z = B + 11 * MIN;
  const W = Z - 7 * D; // the weeks are [Z − 14d, W) and [W, Z)
  const viewer = (user: string, id: string) => sessionOf('wow', id, { user_id: user });
  const s1 = viewer('v1', 's1');
  const s2 = viewer('v1', 's2');
  const s3 = viewer('v2', 's3');
  const s4 = viewer('v3', 's4');
  const s5 = viewer('v4', 's5');
  const s6 = viewer('v5', 's6');
  const o = new Oracle([
    s1('first_frame', Z - 10 * D), //    week before: 10 s
    s1('heartbeat', Z - 10 * D + 10 * S),
    s2('first_frame', Z - 2 * D), //     last week: 20 s
    s2('heartbeat', Z - 2 * D + 10 * S),
    s2('heartbeat', Z - 2 * D + 20 * S),
    s3('first_frame', Z - 1 * D), //     last week: 20 s
    s3('heartbeat', Z - 1 * D + 10 * S),
    s3('heartbeat', Z - 1 * D + 20 * S),
    s4('first_frame', W - 15 * S), //    straddles W: 10 s in each week, a session of both weeks
    s4('heartbeat', W - 5 * S),
    s4('heartbeat', W + 5 * S),
    s5('first_frame', Z - 31 * D), //    outside the 30 days
    s5('heartbeat', Z - 31 * D + 10 * S),
    s6('first_frame', Z - 30 * D - 5 * S), // straddles Z − 30d: inside
    s6('heartbeat', Z - 30 * D + 5 * S),
    ev('wow', 'payment_succeeded', Z - 3 * D, { user_id: 'v1', properties: { amount_inr: 100 } }),
  ]);
  const ov = o.overview('wow', '24h', now);
  t.equal(ov.monthly_active_users, 4, 'v1, v2, v3, v5, whatever the range');
  t.equal(o.overview('wow', '7d', now).monthly_active_users, 4);
  // mau: last week v1, v2, v3 = 3, before v1, v3 = 2 → 50 %. watch: 50 s vs 20 s → 150 %.
  // subs: 0 and 0 → 0. revenue: 100 vs 0 → 100.
  approx(t, ov.wow_delta, { mau: 50, watch_hours: 150, subs: 0, revenue: 100 }, 'wow_delta');

  // Decreases: revenue 200 → 50 is −75 %; subscribers 2 → 1 is −50 %.
  const o2 = new Oracle([
    ev('down', 'payment_succeeded', Z - 8 * D, { user_id: 'w1', properties: { amount_inr: 200 } }),
    ev('down', 'payment_succeeded', Z - 1 * D, { user_id: 'w1', properties: { amount_inr: 50 } }),
    ev('down', 'subscription_started', Z - 20 * D, { user_id: 'w1', properties: { plan: 'p', amount_inr: 1 } }),
    ev('down', 'subscription_started', Z - 10 * D, { user_id: 'w2', properties: { plan: 'p', amount_inr: 1 } }),
    ev('down', 'subscription_cancelled', Z - 2 * D, { user_id: 'w2' }),
  ]);
  approx(
    t,
    o2.overview('down', '24h', now).wow_delta,
    { mau: 0, watch_hours: 0, subs: -50, revenue: -75 },
    'wow_delta down',
  );
});

t.test('geo and devices: per session region and device, shares', async (t) => {
  const now = B + 10 * MIN;
  const ctx = (region: string | undefined, device: string | undefined): Record<string, string> => ({
    ...(region !== undefined ? { region } : {}),
    ...(device !== undefined ? { device_type: device } : {}),
  });
  const g1 = sessionOf('geo', 'g1', { user_id: 'u1' });
  const g2 = sessionOf('geo', 'g2', { user_id: 'u1' });
  const g3 = sessionOf('geo', 'g3', { anonymous_id: 'a1' });
  const g4 = sessionOf('geo', 'g4', { anonymous_id: 'a2' });
  const g5 = sessionOf('geo', 'g5', { anonymous_id: 'a3' });
  const g6 = sessionOf('geo', 'g6', { anonymous_id: 'a4' });
  const watch = (
    s: ReturnType<typeof sessionOf>,
    start: number,
    seconds: number,
    context: Record<string, string>,
  ): OracleEvent[] => {
    const list = [s('play_start', start, { context })];
    for (let i = 0; i <= seconds; i += 10) list.push(s(i === 0 ? 'first_frame' : 'heartbeat', start + S + i * S));
    return list;
  };
  const o = new Oracle([
    ...watch(g1, B, 30, ctx('Maharashtra', 'tv')), //        30 s
    ...watch(g2, B + 100 * S, 10, ctx('Maharashtra', 'mobile')), // 10 s, same viewer u1
    ...watch(g3, B + 200 * S, 30, ctx('Karnataka', 'mobile')), //   30 s
    g4('play_start', B + 300 * S, { context: {} }), //         no region, no device, no watch time
    // g5: the first event has no region; the next one's counts.
    g5('play_start', B + 400 * S, { context: ctx(undefined, 'desktop') }),
    g5('first_frame', B + 401 * S, { context: ctx('Delhi', 'desktop') }),
    g5('heartbeat', B + 411 * S),
    g5('heartbeat', B + 421 * S),
    g5('heartbeat', B + 431 * S), //                            30 s
    ...watch(g6, B - 3 * D, 30, ctx('Goa', 'tv')), //          not in the range
  ]);
  // Total 100 s: Maharashtra 40 (40 %), Delhi 30 and Karnataka 30 (30 % each; tie → by name), unknown 0.
  approx(
    t,
    o.geo('geo', '24h', now),
    [
      { region: 'Maharashtra', watch_hours: 40 / 3600, viewers: 1, share_pct: 40 },
      { region: 'Delhi', watch_hours: 30 / 3600, viewers: 1, share_pct: 30 },
      { region: 'Karnataka', watch_hours: 30 / 3600, viewers: 1, share_pct: 30 },
      { region: 'unknown', watch_hours: 0, viewers: 1, share_pct: 0 },
    ],
    'geo',
  );
  // 5 sessions: mobile 2 (40 %), then desktop, tv, unknown 1 each (20 %), by name.
  approx(
    t,
    o.devices('geo', '24h', now),
    [
      { device: 'mobile', sessions: 2, share_pct: 40 },
      { device: 'desktop', sessions: 1, share_pct: 20 },
      { device: 'tv', sessions: 1, share_pct: 20 },
      { device: 'unknown', sessions: 1, share_pct: 20 },
    ],
    'devices',
  );
  t.same(
    o.devices('geo', '7d', now).map((d) => d.device),
    ['mobile', 'tv', 'desktop', 'unknown'],
    '7d adds g6 (tv)',
  );
});

t.test('bitrate: watch time per rendition bucket and a time-weighted mean, per region and device', async (t) => {
  const now = B + 10 * MIN;
  const context = { region: 'Goa', device_type: 'tv' };
  const b1 = sessionOf('br', 'b1', { anonymous_id: 'a1', context });
  const b2 = sessionOf('br', 'b2', { anonymous_id: 'a2', context: { region: 'Goa' } });
  const o = new Oracle([
    b1('play_start', B),
    b1('first_frame', B + 2 * S), //                            2→12: 10 s, bitrate not known yet
    b1('bitrate_change', B + 12 * S, { bitrate_kbps: 3000 }), //  12→22: 10 s at 3000
    b1('rebuffer_start', B + 22 * S), //                         22→32: 10 s at 3000, rebuffering counts
    b1('heartbeat', B + 32 * S, { bitrate_kbps: 800 }), //       32→42: 10 s at 800
    b1('heartbeat', B + 42 * S),
    // Two renditions at one instant, the higher given first: the lower is ordered first, the higher plays on.
    b2('play_start', B, { bitrate_kbps: 400 }),
    b2('first_frame', B + S),
    b2('bitrate_change', B + 11 * S, { bitrate_kbps: 16_000 }), // 1→11: 10 s at 400
    b2('bitrate_change', B + 11 * S, { bitrate_kbps: 1000 }), //   11→41: 30 s at 16000
    b2('heartbeat', B + 41 * S),
  ]);
  // Goa/tv: 40 s, 30 s known: (20 × 3000 + 10 × 800) / 30 ≈ 2266.7 kbps. Goa/unknown: 40 s, (10 × 400 + 30 × 16000) / 40.
  approx(
    t,
    o.bitrate('br', '24h', now),
    [
      {
        region: 'Goa',
        device: 'tv',
        watch_hours: 40 / 3600,
        avg_bitrate_kbps: 68_000 / 30,
        renditions: [
          { bucket: '500-1000', min_kbps: 500, max_kbps: 1000, watch_hours: 10 / 3600, share_pct: 25 },
          { bucket: '2000-4000', min_kbps: 2000, max_kbps: 4000, watch_hours: 20 / 3600, share_pct: 50 },
          { bucket: 'unknown', min_kbps: null, max_kbps: null, watch_hours: 10 / 3600, share_pct: 25 },
        ],
      },
      {
        region: 'Goa',
        device: 'unknown',
        watch_hours: 40 / 3600,
        avg_bitrate_kbps: 484_000 / 40,
        renditions: [
          { bucket: '0-500', min_kbps: 0, max_kbps: 500, watch_hours: 10 / 3600, share_pct: 25 },
          { bucket: '16000+', min_kbps: 16_000, max_kbps: null, watch_hours: 30 / 3600, share_pct: 75 },
        ],
      },
    ],
    'bitrate',
  );
});

t.test('makeScenario: deterministic, valid for ingest, late events and duplicates', async (t) => {
  const opts = {
    seed: 7,
    tenants: ['acme', 'bharat', 'chitra'],
    now: Date.parse('2026-11-21T10:05:17.345Z'),
    sessionsPerTenant: 40,
  };
  const sc = makeScenario(opts);
  t.equal(JSON.stringify(makeScenario(opts)), JSON.stringify(sc), 'same seed, same scenario');
  t.not(
    JSON.stringify(makeScenario({ ...opts, seed: 8 }).expected),
    JSON.stringify(sc.expected),
    'another seed, another scenario',
  );

  const ids = sc.expected.map((e) => e.event_id as string);
  t.equal(new Set(ids).size, ids.length, 'expected: no event_id twice');
  t.equal(sc.events.length, sc.expected.length);
  t.ok(sc.expected.length > 2000 && sc.expected.length < 10_000, `a few thousand events (${sc.expected.length})`);
  t.ok(
    sc.expected.every((e) => e.ts <= opts.now),
    'nothing after now',
  );

  // Every sent event is valid, keeps its ts when sent with sent_at = now, and is one of `expected`.
  const byId = new Map(sc.expected.map((e) => [e.event_id as string, e]));
  const firstBatch = new Map<string, number>();
  let sent = 0;
  let invalid = 0;
  let moved = 0;
  sc.batches.forEach((batch, bi) => {
    t.ok(batch.events.length >= 1 && batch.events.length <= 200, 'batch size');
    const receivedAt = Date.now();
    const stamps = stampTimes(
      batch.events.map((e) => e.ts as string),
      receivedAt,
      false,
      receivedAt,
    );
    batch.events.forEach((e, i) => {
      sent++;
      if (!validateEvent(JSON.parse(JSON.stringify(e)), i, true).ok) invalid++;
      const x = byId.get(e.event_id as string);
      if (!x || x.tenant !== batch.tenant || stamps[i]?.ts !== x.ts) moved++;
      if (!firstBatch.has(e.event_id as string)) firstBatch.set(e.event_id as string, bi);
    });
  });
  t.equal(invalid, 0, 'ingest accepts every event');
  t.equal(moved, 0, 'each sent event is an expected one, same tenant, same ts');
  t.equal(firstBatch.size, sc.expected.length, 'every expected event is sent');
  t.ok(sent > sc.expected.length, `duplicates are sent (${sent - sc.expected.length})`);
  const seenIn = new Map<string, number>();
  let dupInSameBatch = 0;
  sc.batches.forEach((batch, bi) => {
    for (const e of batch.events) {
      if (seenIn.get(e.event_id as string) === bi) dupInSameBatch++;
      seenIn.set(e.event_id as string, bi);
    }
  });
  t.equal(dupInSameBatch, 0, 'a duplicate always comes in a later batch');

  // Late: an event of a session sent in a later batch than a later event of that session; some days old.
  let late = 0;
  let lateOld = 0;
  const sessions = new Map<string, OracleEvent[]>();
  for (const e of sc.expected)
    if (e.session_id)
      sessions.set(`${e.tenant}/${e.session_id}`, [...(sessions.get(`${e.tenant}/${e.session_id}`) ?? []), e]);
  for (const list of sessions.values()) {
    for (const e of list) {
      const isLate = list.some(
        (f) =>
          f.ts > e.ts &&
          (firstBatch.get(f.event_id as string) as number) < (firstBatch.get(e.event_id as string) as number),
      );
      if (isLate) late++;
      if (isLate && e.ts < opts.now - 2 * D) lateOld++;
    }
  }
  t.ok(late > 0 && lateOld > 0, `late events (${late}, ${lateOld} days old)`);

  // Coverage of what the metrics depend on.
  for (const tenant of opts.tenants) {
    const mine = sc.expected.filter((e) => e.tenant === tenant);
    const types = new Set(mine.map((e) => e.event_type));
    for (const type of [
      'play_start',
      'first_frame',
      'heartbeat',
      'pause',
      'resume',
      'seek_start',
      'seek_end',
      'rebuffer_start',
      'rebuffer_end',
      'bitrate_change',
      'error',
      'ended',
      'session_end',
      'content_published',
      'subscription_started',
      'subscription_renewed',
      'subscription_cancelled',
      'subscription_expired',
      'payment_succeeded',
      'payment_failed',
    ]) {
      t.ok(types.has(type), `${tenant}: ${type}`);
    }
    t.ok(
      mine.some((e) => e.event_type === 'error' && e.properties?.fatal === true),
      `${tenant}: fatal error`,
    );
    t.ok(
      mine.some((e) => e.event_type === 'error' && e.properties?.fatal !== true),
      `${tenant}: non-fatal error`,
    );
    t.ok(
      mine.some((e) => e.event_type === 'play_start' && typeof e.properties?.duration_sec === 'number'),
      `${tenant}: duration on play_start`,
    );
    const tenantSessions = [...sessions.entries()]
      .filter(([k]) => k.startsWith(`${tenant}/`))
      .map(([, l]) => [...l].sort((a, b) => a.ts - b.ts || tieRank(a) - tieRank(b)));
    t.ok(
      tenantSessions.some((l) => l.some((e, i) => i > 0 && e.ts === (l[i - 1] as OracleEvent).ts)),
      `${tenant}: two events of a session at one ts`,
    );
    t.ok(
      tenantSessions.some((l) => l.some((e, i) => i > 0 && e.ts - (l[i - 1] as OracleEvent).ts > 30 * S)),
      `${tenant}: a gap over 30 s`,
    );
    t.ok(
      tenantSessions.some((l) =>
        l.some(
          (e, i) =>
            e.event_type === 'heartbeat' &&
            l.slice(0, i).findLast((f) => f.event_type.startsWith('rebuffer_'))?.event_type === 'rebuffer_start',
        ),
      ),
      `${tenant}: a heartbeat during a stall`,
    );
    for (const range of ['24h', '7d', '30d'] as const) {
      const { from } = resolveRange(range, opts.now);
      t.ok(
        tenantSessions.some(
          (l) => (l[0] as OracleEvent).ts < from && (l[l.length - 1] as OracleEvent).ts >= from + 2 * MIN,
        ),
        `${tenant}: a session straddles the ${range} start`,
      );
    }
    t.ok(
      tenantSessions.filter((l) => (l[0] as OracleEvent).ts >= opts.now - D).length > tenantSessions.length / 2,
      `${tenant}: most sessions in the last 24 h`,
    );
    t.ok(
      tenantSessions.some((l) => (l[0] as OracleEvent).ts < opts.now - 30 * D),
      `${tenant}: sessions over 30 days old`,
    );
    const regions = new Set(mine.map((e) => e.context?.region).filter((r) => r));
    const devices = new Set(mine.map((e) => e.context?.device_type).filter((d) => d));
    t.ok(regions.size >= 3, `${tenant}: regions ${[...regions].join(', ')}`);
    t.ok(
      ['tv', 'mobile', 'desktop'].every((d) => devices.has(d)),
      `${tenant}: devices ${[...devices].join(', ')}`,
    );
    const viewerOf = (l: OracleEvent[]): string =>
      l.find((e) => e.user_id)?.user_id ?? (l.find((e) => e.anonymous_id)?.anonymous_id as string);
    const perViewer = new Map<string, number>();
    for (const l of tenantSessions) perViewer.set(viewerOf(l), (perViewer.get(viewerOf(l)) ?? 0) + 1);
    t.ok(
      [...perViewer.values()].some((n) => n > 1),
      `${tenant}: a viewer with several sessions`,
    );
    t.ok(
      tenantSessions.some((l) => l.every((e) => !e.user_id)),
      `${tenant}: anonymous sessions`,
    );
    t.ok(
      tenantSessions.some((l) => !l[0]?.user_id && l.some((e) => e.user_id)),
      `${tenant}: a login during a session`,
    );
  }

  // The oracle runs on it and finds activity.
  const o = new Oracle(sc.expected);
  const ov = o.overview('acme', '24h', opts.now);
  t.ok(ov.watch_hours > 0 && ov.paid_subscribers > 0 && ov.monthly_active_users > 0, JSON.stringify(ov));
  t.ok(o.concurrency('acme', '24h', 5, opts.now).peak >= 2, 'sessions overlap');
});

t.test('concurrency by second matches a literal reading of the definition, on a scenario', async (t) => {
  const now = Date.parse('2026-11-21T10:05:17.345Z');
  const sc = makeScenario({ seed: 3, tenants: ['acme'], now, sessionsPerTenant: 40 });
  const sessions = new Map<string, OracleEvent[]>();
  for (const e of sc.expected) if (e.session_id) sessions.set(e.session_id, [...(sessions.get(e.session_id) ?? []), e]);
  // State after each event, straight from docs/metrics.md "State after each event".
  const states = [...sessions.values()].map((list) => {
    const sorted = [...list].sort((a, b) => a.ts - b.ts || tieRank(a) - tieRank(b));
    let state = 'none';
    return sorted.map((e) => {
      const fatal = e.event_type === 'error' && e.properties?.fatal === true;
      if (e.event_type === 'play_start') state = 'starting';
      else if (['first_frame', 'resume', 'seek_end', 'rebuffer_end'].includes(e.event_type)) state = 'playing';
      else if (e.event_type === 'heartbeat') state = state === 'rebuffering' ? 'rebuffering' : 'playing';
      else if (e.event_type === 'rebuffer_start') state = 'rebuffering';
      else if (e.event_type === 'pause') state = 'paused';
      else if (['ended', 'session_end'].includes(e.event_type) || fatal) state = 'closed';
      return { ts: e.ts, active: ['starting', 'playing', 'rebuffering'].includes(state) };
    });
  });
  // Four hours around the burst, every second: the last event at or before t, active, at most 30 s old.
  const to = Math.floor(now / MIN) * MIN - 1 * H;
  const from = to - 4 * H;
  const walked = new Oracle(sc.expected).concurrencyBySecond('acme', from, to);
  let mismatches = 0;
  let busiest = 0;
  for (let s = from; s < to; s += S) {
    let n = 0;
    for (const list of states) {
      const last = list.findLast((x) => x.ts <= s);
      if (last && last.active && s - last.ts <= 30 * S) n++;
    }
    if (n !== (walked.get(s) ?? 0)) mismatches++;
    busiest = Math.max(busiest, n);
  }
  t.equal(mismatches, 0);
  t.ok(busiest >= 2, `up to ${busiest} at once`);
});
