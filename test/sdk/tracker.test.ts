import t from 'tap';
import { Tracker, type ContentType, type SdkEvent } from '../../sdk/web/src/tracker.js';
import type { contentTypes } from '../../src/ingest/taxonomy.js';
import { validateEvent } from '../../src/ingest/validate.js';
import { Rng } from '../../bench/simulator/rng.js';

// The SDK's content types are ingest's, checked when the tests compile: a type the SDK allows and ingest rejects
// would lose a session's play_start.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameContentTypes: Same<ContentType, (typeof contentTypes)[number]> = true;
t.ok(sameContentTypes);

// The SDK's state machine on a test clock: the player's signals in, CONTRACT §5's events out, with the semantics §6's
// metrics assume (startup from play intent to the first frame, rebuffering only for stalls that are not startup or
// seeks, heartbeats while playing or rebuffering), for every ordering of signals players produce.

const t0 = Date.UTC(2026, 10, 26, 12, 0, 0);

function harness(o: { minStallMs?: number } = {}) {
  let now = t0;
  // A playhead between whole seconds, as a real one is.
  let position = 0.37;
  let n = 0;
  const events: SdkEvent[] = [];
  const tracker = new Tracker({
    viewer: { user_id: 'u1' },
    content: { id: 'final-live', title: 'The Final', type: 'sports', duration_sec: 3600 },
    properties: { plan: 'premium' },
    context: { player: 'html5' },
    newId: () => `s${++n}`,
    now: () => now,
    position: () => position,
    emit: (e) => events.push(e),
    ...o,
  });
  /** Advance the clock by `ms` in steps of a second at most, ticking as a page does; the playhead moves while playing. */
  const wait = (ms: number, playing = true): void => {
    for (let left = ms; left > 0;) {
      const step = Math.min(1000, left);
      now += step;
      if (playing) position += step / 1000;
      left -= step;
      tracker.tick();
    }
  };
  /** Advance the clock by `ms` between two of the page's ticks: nothing ticks, the playhead stands. */
  const between = (ms: number): void => {
    now += ms;
  };
  const types = (): string[] => events.map((e) => e.event_type);
  return { tracker, events, types, wait, between, at: () => now };
}

t.test('a session as §5 describes it: startup, heartbeats, a real stall, a pause, a seek, the end', async (t) => {
  const h = harness();
  h.tracker.play();
  h.wait(800, false);
  h.tracker.playing();
  h.wait(25_000);
  // A stall of 120 ms (a rendition switch) is no rebuffer; one of 3 s is, from its start.
  h.tracker.waiting();
  h.wait(120, false);
  h.tracker.playing();
  h.wait(5_000);
  h.tracker.waiting();
  const stalledAt = h.at();
  h.wait(3_000, false);
  h.tracker.playing();
  h.tracker.pause();
  h.wait(60_000, false);
  h.tracker.play();
  h.tracker.seeking();
  h.tracker.seeked();
  h.tracker.waiting(); // buffering after a seek belongs to the seek
  h.wait(2_000, false);
  h.tracker.playing();
  h.wait(10_000);
  h.tracker.pause(true); // the pause that comes with the end
  h.tracker.ended();
  h.tracker.close();
  t.same(h.types(), [
    'play_start',
    'first_frame',
    'heartbeat',
    'heartbeat',
    'rebuffer_start',
    'rebuffer_end',
    'pause',
    'resume',
    'seek_start',
    'seek_end',
    'heartbeat',
    'ended',
  ]);
  const [start, first] = h.events;
  t.match(start, {
    session_id: 's1',
    user_id: 'u1',
    content_id: 'final-live',
    content_title: 'The Final',
    content_type: 'sports',
    properties: { plan: 'premium', duration_sec: 3600 },
    context: { player: 'html5' },
  });
  t.equal(Date.parse(first!.ts) - Date.parse(start!.ts), 800, 'startup: play intent to first frame');
  t.equal(
    Date.parse(h.events.find((e) => e.event_type === 'rebuffer_start')!.ts),
    stalledAt,
    'a rebuffer starts when the stall did',
  );
  t.equal(Date.parse(h.events[5]!.ts) - stalledAt, 3_000, 'and ends when frames came back');
  for (const [i, e] of h.events.entries())
    t.ok(validateEvent(e, i, false).ok, `${e.event_type} is accepted by ingest as it is`);
});

t.test(
  'no heartbeat while paused; every 10 s while rebuffering; a new session after the end or a fatal error',
  async (t) => {
    const h = harness();
    h.tracker.play();
    h.tracker.playing();
    h.tracker.pause();
    h.wait(30_000, false);
    t.same(h.types(), ['play_start', 'first_frame', 'pause']);
    h.tracker.play();
    h.tracker.waiting();
    h.wait(25_000, false);
    t.same(h.types().slice(3), ['resume', 'rebuffer_start', 'heartbeat', 'heartbeat']);
    h.tracker.error('MEDIA_ERR_NETWORK', true);
    h.tracker.close();
    t.same(h.types().slice(-1), ['error'], 'a failed session needs no session_end');
    t.match(h.events.at(-1), { properties: { code: 'MEDIA_ERR_NETWORK', fatal: true } });
    h.tracker.play();
    t.match(h.events.at(-1), { event_type: 'play_start', session_id: 's2' });
    h.tracker.rendition(1600);
    h.tracker.rendition(1600);
    h.tracker.rendition(3000);
    t.same(h.types().slice(-1), ['bitrate_change'], 'the first rendition is no change; the same one twice is one');
    t.match(h.events.at(-1), { bitrate_kbps: 3000 });
    h.tracker.close();
    t.same(h.types().slice(-1), ['session_end']);
    h.tracker.close();
    t.same(h.types().slice(-1), ['session_end'], 'once');
  },
);

t.test('every ordering of stalls, seeks and pauses keeps the events consistent', async (t) => {
  const signals = [
    'play',
    'playing',
    'waiting',
    'seeking',
    'seeked',
    'pause',
    'pauseAtEnd',
    'rendition',
    'wait',
    'wait',
    'wait',
  ] as const;
  const rng = new Rng(11);
  let checked = 0;
  for (let run = 0; run < 2000; run++) {
    const h = harness();
    h.tracker.play();
    for (let i = 0; i < 30; i++) {
      const s = signals[rng.int(0, signals.length - 1)]!;
      if (s === 'wait') h.wait(rng.int(1, 15_000), rng.chance(0.5));
      else if (s === 'pauseAtEnd') h.tracker.pause(true);
      else if (s === 'rendition') h.tracker.rendition(rng.pick([800, 1600, 3000]));
      else h.tracker[s]();
    }
    h.tracker.close();
    const problems: string[] = [];
    let rebuffering = false;
    let seeking = false;
    let last = 0;
    for (const e of h.events) {
      const ts = Date.parse(e.ts);
      if (ts <= last) problems.push(`${e.event_type} goes back in time`);
      last = ts;
      if (e.event_type === 'rebuffer_start') {
        if (rebuffering || seeking) problems.push('rebuffer_start while rebuffering or seeking');
        rebuffering = true;
      }
      if (e.event_type === 'rebuffer_end') {
        if (!rebuffering) problems.push('rebuffer_end without a start');
        rebuffering = false;
      }
      if (e.event_type === 'seek_start') {
        if (seeking || rebuffering) problems.push('seek_start while seeking or rebuffering');
        seeking = true;
      }
      if (e.event_type === 'seek_end') seeking = false;
      if ((e.event_type === 'pause' || e.event_type === 'session_end') && rebuffering)
        problems.push(`${e.event_type} while rebuffering`);
    }
    if (rebuffering) problems.push('a rebuffer left open');
    const ends = h.types().filter((x) => x === 'session_end' || x === 'ended').length;
    if (ends !== 1) problems.push(`${ends} endings`);
    if (problems.length > 0) {
      t.fail(`run ${run}: ${problems.join('; ')}: ${h.types().join(' ')}`);
      break;
    }
    checked++;
  }
  t.equal(checked, 2000, 'every run consistent');
});

t.test(
  'a stall that ends, or fails the session, between two ticks still counts if it lasted long enough',
  async (t) => {
    const h = harness();
    h.tracker.play();
    h.tracker.playing();
    h.wait(5000);
    const stalledAt = h.at();
    h.tracker.waiting();
    h.between(600);
    h.tracker.playing();
    t.same(h.types().slice(2), ['rebuffer_start', 'rebuffer_end'], 'a stall of 600 ms ended before the next tick');
    t.same(
      h.events.slice(2).map((e) => Date.parse(e.ts) - stalledAt),
      [0, 600],
      'from when it began to when frames came back',
    );
    h.wait(5000);
    h.tracker.waiting();
    h.between(200);
    h.tracker.playing();
    t.equal(h.events.length, 4, 'one of 200 ms is no rebuffer, ticked or not');
    // Paused, or failed, mid-stall: the stall counts until then.
    for (const end of ['pause', 'fatal'] as const) {
      h.tracker.play();
      h.tracker.playing();
      h.wait(5000);
      const from = h.at();
      h.tracker.waiting();
      h.between(700);
      if (end === 'pause') h.tracker.pause();
      else h.tracker.error('MEDIA_ERR_NETWORK', true);
      const ts = h.events.slice(end === 'pause' ? -3 : -2).map((e) => [e.event_type, Date.parse(e.ts) - from]);
      t.same(
        ts,
        end === 'pause'
          ? [
              ['rebuffer_start', 0],
              ['rebuffer_end', 700],
              ['pause', 701],
            ]
          : [
              ['rebuffer_start', 0],
              ['error', 700],
            ],
        `a stall ended by ${end === 'pause' ? 'a pause' : 'a fatal error'} 700 ms in`,
      );
    }
  },
);

t.test(
  'after a seek, playback counts as back once the playhead moves, even if the player sends no `playing`',
  async (t) => {
    const h = harness();
    h.tracker.play();
    h.tracker.playing();
    h.tracker.seeking();
    h.tracker.seeked();
    h.wait(1000, false);
    h.tracker.waiting();
    h.wait(5000, false);
    t.same(
      h.types(),
      ['play_start', 'first_frame', 'seek_start', 'seek_end'],
      'still the seek: no rebuffer, no heartbeat',
    );
    h.wait(12_000, true);
    t.same(h.types().slice(4), ['heartbeat'], 'heartbeats again once it moves');
  },
);

t.test(
  "a player's own end of a stall ends only a stall: Shaka's buffering(false) before the first frame is not one",
  async (t) => {
    const h = harness();
    h.tracker.play();
    h.tracker.unstalled();
    h.wait(900, false);
    h.tracker.playing();
    t.equal(Date.parse(h.events[1]!.ts) - Date.parse(h.events[0]!.ts), 900, 'startup runs to the first frame');
    h.tracker.waiting();
    h.wait(2000, false);
    h.tracker.unstalled();
    t.same(h.types(), ['play_start', 'first_frame', 'rebuffer_start', 'rebuffer_end']);
  },
);
