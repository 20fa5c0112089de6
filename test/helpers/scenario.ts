// A deterministic traffic scenario for comparing the service with the oracle (bench/simulator/oracle.ts). Everything
// comes from a seeded PRNG and the given `now`: the same options always give the same events, ids and batches.
//
// Each tenant gets viewers (logged in and anonymous, some with two devices), a small catalogue, playback sessions
// over the last ~40 days (most in the last 24 h, a burst a few hours ago, some straddling the 24h, 7d and 30d range
// starts, one still playing at `now`), and billing events (subscriptions, renewals, cancellations, failed renewals
// that expire, re-subscriptions, one-off payments). The send order holds some events back to the end (late, some of
// them days old) and sends some events twice (same event_id, later batch).

import { resolveRange, type OracleEvent } from '../../bench/simulator/oracle.js';
import { Rng } from '../../bench/simulator/rng.js';
import { toIngest } from '../../bench/simulator/sender.js';

export interface ScenarioOptions {
  seed: number;
  tenants: string[];
  now: number;
  sessionsPerTenant: number;
}

/** An event as sent to `POST /v1/ingest/events`. */
export type IngestEvent = Record<string, unknown>;

export interface Scenario {
  /** Every distinct event, once, sorted by tenant (in the given order) and ts. */
  events: Array<{ tenant: string; event: IngestEvent }>;
  /** Send order, each at most 200 events; late events and duplicates included. */
  batches: Array<{ tenant: string; events: IngestEvent[] }>;
  /** The de-duplicated events as they will be stored. */
  expected: OracleEvent[];
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const BATCH_MAX = 200;

// ---- the world ------------------------------------------------------------------------------------------------

const regions: ReadonlyArray<readonly [{ region: string; pops: readonly string[] }, number]> = [
  [{ region: 'Maharashtra', pops: ['bom1', 'bom2'] }, 5],
  [{ region: 'Karnataka', pops: ['blr1'] }, 3],
  [{ region: 'Delhi', pops: ['del1'] }, 3],
  [{ region: 'Tamil Nadu', pops: ['maa1'] }, 2],
  [{ region: 'West Bengal', pops: ['ccu1'] }, 2],
  [{ region: 'Telangana', pops: ['hyd1'] }, 2],
  [{ region: 'Uttar Pradesh', pops: ['del1', 'lko1'] }, 2],
  [{ region: 'Kerala', pops: ['maa1'] }, 1],
];

const devices: ReadonlyArray<readonly [string, number]> = [
  ['mobile', 5],
  ['tv', 3],
  ['desktop', 3],
  ['tablet', 1],
];

interface Viewer {
  anonymousId: string;
  userId?: string;
  context: Record<string, string>;
}

interface Content {
  id: string;
  /** Length of the media in seconds; null for live. */
  duration: number | null;
  /** What play_start carries: duration_sec (always, for some sessions, never), title and type. */
  durationOnStart: 'always' | 'some' | 'never';
  startDuration?: number;
  titleOnStart: ((ts: number) => string) | null;
  typeOnStart: string | null;
  weight: number;
}

/**
 * The catalogue exercises every branch of docs/metrics.md's title/duration rules: published with a different
 * working title on play_start (published wins), republished with a new title and duration (latest wins), duration
 * from play_start that differs from the catalogue (play_start wins), no duration at all (live, trailer), a title
 * that changes every day (latest event wins), no title anywhere.
 */
const catalogue: readonly Content[] = [
  {
    id: 'mov-monsoon',
    duration: 7200,
    durationOnStart: 'never',
    titleOnStart: () => 'Monsoon Letters (working title)',
    typeOnStart: 'movie',
    weight: 3,
  },
  {
    id: 'ep-gully-s1e1',
    duration: 1500,
    durationOnStart: 'some',
    startDuration: 1497,
    titleOnStart: () => 'Gully Cricket S1E1',
    typeOnStart: 'episode',
    weight: 4,
  },
  {
    id: 'ep-gully-s1e2',
    duration: 1560,
    durationOnStart: 'always',
    titleOnStart: () => 'Gully Cricket S1E2',
    typeOnStart: 'episode',
    weight: 3,
  },
  {
    id: 'live-kabaddi',
    duration: null,
    durationOnStart: 'never',
    titleOnStart: (ts) => `Pro Kabaddi Live: match day ${Math.floor(ts / DAY) % 1000}`,
    typeOnStart: 'live',
    weight: 3,
  },
  {
    id: 'clip-chai',
    duration: 180,
    durationOnStart: 'some',
    titleOnStart: () => 'Chai Break',
    typeOnStart: 'clip',
    weight: 4,
  },
  { id: 'trl-yatra', duration: 95, durationOnStart: 'never', titleOnStart: null, typeOnStart: 'trailer', weight: 2 },
  { id: 'doc-ganga', duration: 3000, durationOnStart: 'never', titleOnStart: null, typeOnStart: null, weight: 2 },
];

const contentById = new Map(catalogue.map((c) => [c.id, c]));
const bitrates = [400, 800, 1600, 3000, 4500, 7800];
const plans: ReadonlyArray<readonly [string, number]> = [
  ['mobile', 149],
  ['standard', 299],
  ['premium', 649],
];

type Ending = 'ended' | 'session_end' | 'fatal' | 'timeout' | 'pause_close' | 'startup_fail';
type Incident =
  | 'heartbeat'
  | 'pause'
  | 'pause_same_ts'
  | 'pause_long'
  | 'rebuffer'
  | 'rebuffer_hb'
  | 'rebuffer_long'
  | 'seek'
  | 'bitrate'
  | 'error'
  | 'gap';

interface SessionPlan {
  start: number;
  viewer: Viewer;
  content: Content;
  ending: Ending;
  /** Seconds of playback before ending (ignored by 'ended', which plays to the end). */
  watchSec: number;
  startPos: number;
  /** Logs in mid-session: the first events carry only anonymous_id. */
  lateLogin?: boolean;
  /** Incidents forced first, in order, before random ones. */
  script?: Incident[];
  /** ended, session_end and a heartbeat all at one ts. */
  sameTsEnd?: boolean;
}

// ---- one tenant -----------------------------------------------------------------------------------------------

class TenantGen {
  readonly events: OracleEvent[] = [];
  /** Events per session, in generation order. */
  readonly sessions: OracleEvent[][] = [];
  private readonly viewers: Viewer[] = [];
  readonly users: string[] = [];

  constructor(
    private readonly rng: Rng,
    private readonly tenant: string,
    private readonly now: number,
    private readonly sessionCount: number,
  ) {}

  run(): void {
    this.makeViewers();
    this.publishCatalogue();
    for (const plan of this.planSessions()) this.simulate(plan);
    this.billing();
  }

  private emit(e: Omit<OracleEvent, 'tenant' | 'event_id'>): OracleEvent | null {
    // Nothing after `now`: a session still under way at `now` simply has no later events yet.
    if (e.ts > this.now) return null;
    const event: OracleEvent = { tenant: this.tenant, event_id: this.rng.uuid(), ...e };
    this.events.push(event);
    return event;
  }

  private makeViewers(): void {
    const count = Math.max(8, Math.round(this.sessionCount * 0.45));
    const userCount = Math.max(6, Math.round(count * 0.55));
    // The first three differ in region and device (the special sessions use them, so every tenant has all three).
    const firstDevices = ['tv', 'mobile', 'desktop'];
    for (let i = 0; i < count; i++) {
      const place = i < 3 ? (regions[i] as (typeof regions)[number])[0] : this.rng.weighted(regions);
      const device = firstDevices[i] ?? this.rng.weighted(devices);
      const viewer: Viewer = {
        anonymousId: `anon-${this.rng.hex(12)}`,
        context: { region: place.region, country: 'IN', pop: this.rng.pick(place.pops), device_type: device },
      };
      if (i < userCount) {
        viewer.userId = `${this.tenant}-user-${String(i + 1).padStart(2, '0')}`;
        this.users.push(viewer.userId);
      }
      this.viewers.push(viewer);
    }
    // Some users also watch on a second device (another anonymous_id, maybe another pop): one viewer, more sessions.
    for (let i = 0; i < userCount; i += 3) {
      const first = this.viewers[i] as Viewer;
      this.viewers.push({
        anonymousId: `anon-${this.rng.hex(12)}`,
        userId: first.userId,
        context: { ...first.context, device_type: first.context.device_type === 'tv' ? 'mobile' : 'tv' },
      });
    }
  }

  private publishCatalogue(): void {
    const pub = (ts: number, id: string, title: string, type: string, duration: number): void => {
      this.emit({
        ts,
        event_type: 'content_published',
        content_id: id,
        content_title: title,
        content_type: type,
        properties: { duration_sec: duration },
      });
    };
    const ago = (lo: number, hi: number): number => this.now - this.rng.int(lo, hi);
    // Republished with a new title and length: the latest wins, for every session, old or new.
    pub(ago(50 * DAY, 55 * DAY), 'mov-monsoon', 'Monsoon Letters', 'movie', 7080);
    pub(ago(3 * DAY, 4 * DAY), 'mov-monsoon', 'Monsoon Letters (Extended Cut)', 'movie', 7200);
    pub(ago(45 * DAY, 60 * DAY), 'ep-gully-s1e1', 'Gully Cricket S1E1: The Toss', 'episode', 1500);
    pub(ago(45 * DAY, 60 * DAY), 'clip-chai', 'Chai Break', 'clip', 180);
    pub(ago(45 * DAY, 60 * DAY), 'doc-ganga', 'Ganga: A River Story', 'movie', 3000);
    // Published, never watched: not in top content.
    pub(ago(1 * DAY, 2 * DAY), 'ser-unwatched', 'Nobody Watched This', 'series', 2400);
  }

  private planSessions(): SessionPlan[] {
    const rng = this.rng;
    const now = this.now;
    const day = resolveRange('24h', now).from;
    const week = resolveRange('7d', now).from;
    const month = resolveRange('30d', now).from;
    const plans: SessionPlan[] = [];
    const plan = (start: number, extra: Partial<SessionPlan> = {}): SessionPlan => {
      const content = extra.content ?? rng.weighted(catalogue.map((c) => [c, c.weight] as const));
      const ending =
        extra.ending ??
        rng.weighted<Ending>([
          ['ended', content.duration === null ? 0 : 20],
          ['session_end', 33],
          ['fatal', 8],
          ['timeout', 20],
          ['pause_close', 12],
          ['startup_fail', 4],
        ]);
      const [lo, hi] = rng.weighted<[number, number]>([
        [[20, 90], 25],
        [[90, 420], 50],
        [[420, 1200], 25],
      ]);
      const watchSec = extra.watchSec ?? rng.int(lo, hi);
      let startPos = 0;
      if (content.duration !== null) {
        // 'ended' starts close enough to the end to reach it; others sometimes continue where they left off.
        if (ending === 'ended') startPos = Math.max(0, content.duration - watchSec);
        else if (rng.chance(0.2)) startPos = rng.int(0, Math.floor(content.duration / 2));
      }
      return { start, viewer: rng.pick(this.viewers), content, ending, watchSec, startPos, ...extra };
    };
    const long = (): Content => contentById.get(rng.pick(['mov-monsoon', 'live-kabaddi', 'doc-ganga'])) as Content;
    // Straddlers (long content, so they cannot end early) stay straddlers if the test queries a few minutes late.
    plans.push(plan(day - rng.int(4 * MINUTE, 6 * MINUTE), { ending: 'session_end', watchSec: 780, content: long() }));
    plans.push(plan(day - rng.int(3 * MINUTE, 5 * MINUTE), { ending: 'timeout', watchSec: 600, content: long() }));
    plans.push(plan(week - rng.int(4 * MINUTE, 6 * MINUTE), { ending: 'session_end', watchSec: 720, content: long() }));
    plans.push(
      plan(month - rng.int(4 * MINUTE, 6 * MINUTE), { ending: 'session_end', watchSec: 720, content: long() }),
    );
    // Over well before the 24h range starts.
    plans.push(plan(day - rng.int(40 * MINUTE, 50 * MINUTE), { ending: 'session_end', watchSec: 300 }));
    // In the last 24 h, viewers 0 (tv), 1 (mobile), 2 (desktop), all logged in, and an anonymous one.
    const [tv, mobile, desktop] = this.viewers as [Viewer, Viewer, Viewer];
    const anonymous = this.viewers.find((v) => v.userId === undefined) as Viewer;
    // Still playing at `now`.
    plans.push(
      plan(now - rng.int(3 * MINUTE, 5 * MINUTE), {
        viewer: tv,
        ending: 'session_end',
        watchSec: 3600,
        content: contentById.get('live-kabaddi') as Content,
      }),
    );
    // Logs in after starting anonymously: the viewer is the user (who has another session: the one above).
    plans.push(
      plan(now - rng.int(2 * HOUR, 20 * HOUR), { viewer: tv, lateLogin: true, ending: 'session_end', watchSec: 200 }),
    );
    // Every incident at least once, then ended, session_end and a heartbeat at one ts.
    plans.push(
      plan(now - rng.int(1 * HOUR, 10 * HOUR), {
        viewer: mobile,
        content: contentById.get('ep-gully-s1e2') as Content,
        ending: 'ended',
        startPos: 1560 - 500,
        script: [
          'heartbeat',
          'rebuffer_hb',
          'heartbeat',
          'pause_same_ts',
          'seek',
          'bitrate',
          'error',
          'gap',
          'rebuffer_long',
          'pause_long',
          'rebuffer',
        ],
        sameTsEnd: true,
      }),
    );
    plans.push(plan(now - rng.int(30 * MINUTE, 20 * HOUR), { viewer: desktop, ending: 'fatal', watchSec: 120 }));
    plans.push(plan(now - rng.int(30 * MINUTE, 20 * HOUR), { viewer: anonymous, ending: 'startup_fail' }));

    // The rest, in fixed proportions: 10 % 7–40 days ago, 15 % in the last week, 35 % in a burst ~3 h ago
    // (concurrency above 1), the rest over the last 24 h.
    const burst = now - 3 * HOUR - rng.int(0, 30 * MINUTE);
    const rest = Math.max(0, this.sessionCount - plans.length);
    const nOld = Math.max(1, Math.round(rest * 0.1));
    const nWeek = Math.max(1, Math.round(rest * 0.15));
    const nBurst = Math.round(rest * 0.35);
    for (let i = 0; i < rest; i++) {
      const where = i < nOld ? 'old' : i < nOld + nWeek ? 'week' : i < nOld + nWeek + nBurst ? 'burst' : 'day';
      const start =
        where === 'burst'
          ? burst + rng.int(0, 15 * MINUTE)
          : where === 'day'
            ? now - rng.int(2 * MINUTE, DAY - 10 * MINUTE)
            : where === 'week'
              ? now - rng.int(DAY, 7 * DAY)
              : now - rng.int(7 * DAY, 40 * DAY);
      plans.push(plan(start));
    }
    return plans;
  }

  private simulate(p: SessionPlan): void {
    const rng = this.rng;
    const sessionId = `${this.tenant}-s-${rng.hex(10)}`;
    const list: OracleEvent[] = [];
    const duration = p.content.duration;
    let t = p.start;
    let pos = p.startPos;
    let watched = 0;
    const loginAt = p.lateLogin ? p.start + 25 * SECOND : -Infinity;

    const emit = (event_type: string, extra: Partial<OracleEvent> = {}): void => {
      const e = this.emit({
        ts: t,
        event_type,
        session_id: sessionId,
        content_id: p.content.id,
        anonymous_id: p.viewer.anonymousId,
        ...(p.viewer.userId !== undefined && t >= loginAt ? { user_id: p.viewer.userId } : {}),
        context: { ...p.viewer.context },
        ...extra,
      });
      if (e) list.push(e);
    };
    const position = (): Partial<OracleEvent> => ({ position_sec: Math.floor(pos) });
    /** Let `ms` pass; playback moves on only while playing. Never 0, so only deliberate pairs share a ts. */
    const advance = (ms: number, playing: boolean): void => {
      const step = Math.max(1, Math.round(ms));
      t += step;
      if (playing) {
        pos += step / SECOND;
        watched += step / SECOND;
        if (duration !== null) pos = Math.min(pos, duration);
      }
    };
    const soon = (): void => advance(rng.int(500, 9000), true);

    // play_start
    const properties: Record<string, unknown> = {};
    const startDuration = p.content.startDuration ?? p.content.duration;
    if (
      startDuration !== null &&
      (p.content.durationOnStart === 'always' || (p.content.durationOnStart === 'some' && rng.chance(0.5)))
    ) {
      properties.duration_sec = startDuration;
    }
    if (rng.chance(0.3)) properties.autoplay = true;
    emit('play_start', {
      ...position(),
      ...(p.content.titleOnStart ? { content_title: p.content.titleOnStart(t) } : {}),
      ...(p.content.typeOnStart ? { content_type: p.content.typeOnStart } : {}),
      ...(Object.keys(properties).length > 0 ? { properties } : {}),
    });
    if (p.ending === 'startup_fail') {
      advance(rng.int(1500, 8000), false);
      emit('error', { properties: { code: 'MEDIA_ERR_SRC_NOT_SUPPORTED', fatal: true } });
      this.sessions.push(list);
      return;
    }
    advance(rng.int(200, 4000), false);
    emit('first_frame', position());

    const script = [...(p.script ?? [])];
    const atEnd = (): boolean => duration !== null && pos + 10 >= duration;
    while (!atEnd() && (p.ending === 'ended' || watched < p.watchSec) && t <= this.now) {
      const incident =
        script.shift() ??
        rng.weighted<Incident>([
          ['heartbeat', 80],
          ['pause', 2],
          ['pause_same_ts', 0.5],
          ['pause_long', 1],
          ['rebuffer', 3],
          ['rebuffer_hb', 1.5],
          ['rebuffer_long', 0.5],
          ['seek', 3],
          ['bitrate', 5],
          ['error', 1.5],
          ['gap', 1.5],
        ]);
      switch (incident) {
        case 'heartbeat':
          advance(10 * SECOND + rng.int(-400, 400), true);
          emit('heartbeat', position());
          break;
        case 'pause':
        case 'pause_long':
        case 'pause_same_ts':
          if (incident === 'pause_same_ts') {
            // The heartbeat and the pause share a ts: ranked heartbeat then pause, the session is paused.
            advance(10 * SECOND, true);
            emit('heartbeat', position());
          } else soon();
          emit('pause', position());
          advance(
            incident === 'pause_long' ? rng.int(31 * SECOND, 4 * MINUTE) : rng.int(3 * SECOND, 25 * SECOND),
            false,
          );
          emit('resume', position());
          break;
        case 'rebuffer':
        case 'rebuffer_hb':
        case 'rebuffer_long': {
          soon();
          emit('rebuffer_start', position());
          if (incident === 'rebuffer') {
            advance(rng.int(300, 8000), false);
          } else if (incident === 'rebuffer_hb') {
            // Heartbeats keep coming during the stall, and the stall keeps counting as rebuffering.
            const beats = rng.int(1, 2);
            for (let i = 0; i < beats; i++) {
              advance(10 * SECOND, false);
              emit('heartbeat', position());
            }
            // Sometimes the stall ends at the ts of the second heartbeat (ranked rebuffer_end, then heartbeat).
            if (beats === 1 || rng.chance(0.5)) advance(rng.int(500, 9000), false);
          } else {
            // A stall with no heartbeat for more than 30 s: capped at 30 s, and the session times out meanwhile.
            advance(rng.int(31 * SECOND, 45 * SECOND), false);
          }
          emit('rebuffer_end', position());
          break;
        }
        case 'seek': {
          soon();
          emit('seek_start', position());
          const jump = rng.chance(0.8) ? rng.int(15, 180) : -rng.int(15, 120);
          pos = Math.max(0, pos + jump);
          if (duration !== null) pos = Math.min(pos, duration - 15);
          advance(rng.int(200, 2500), false);
          emit('seek_end', position());
          break;
        }
        case 'bitrate':
          soon();
          emit('bitrate_change', { ...position(), bitrate_kbps: rng.pick(bitrates) });
          break;
        case 'error':
          soon();
          // Non-fatal: explicitly, or by leaving `fatal` out.
          emit('error', {
            ...position(),
            properties: rng.chance(0.5) ? { code: 'NET_RETRY', fatal: false } : { code: 2001 },
          });
          break;
        case 'gap':
          // The network drops for more than 30 s while the player keeps playing.
          advance(rng.int(35 * SECOND, 150 * SECOND), true);
          emit('heartbeat', position());
          break;
      }
    }

    if (atEnd()) {
      // Played to the end (whatever was planned).
      advance(((duration as number) - pos) * SECOND, true);
      pos = duration as number;
      if (p.sameTsEnd || rng.chance(0.2)) emit('heartbeat', position());
      emit('ended', position());
      if (!p.sameTsEnd) advance(rng.int(200, 5000), false);
      emit('session_end', position());
    } else {
      switch (p.ending) {
        case 'ended':
        case 'session_end':
          soon();
          emit('session_end', position());
          break;
        case 'fatal':
          // Sometimes at the ts of a heartbeat: ranked heartbeat then fatal error, the session is closed.
          if (rng.chance(0.5)) {
            advance(10 * SECOND, true);
            emit('heartbeat', position());
          } else soon();
          emit('error', { ...position(), properties: { code: 'DRM_LICENSE_EXPIRED', fatal: true } });
          break;
        case 'pause_close':
          soon();
          emit('pause', position());
          advance(rng.int(20 * SECOND, 10 * MINUTE), false);
          emit('session_end', position());
          break;
        case 'timeout':
          // The player just stops sending.
          break;
      }
    }
    this.sessions.push(list);
  }

  private billing(): void {
    const rng = this.rng;
    const now = this.now;
    // Billing events of one user never share a ts (docs/metrics.md orders them by ts alone).
    const bill = (ts: number, event_type: string, user: string, properties: Record<string, unknown>): void => {
      this.emit({ ts, event_type, user_id: user, properties });
    };
    const gap = (): number => rng.int(1 * SECOND, 20 * SECOND);
    const subscribe = (user: string, start: number, cancelAt: number | null, failAt: number | null): void => {
      const [planName, amount] = rng.pick(plans);
      bill(start, 'subscription_started', user, { plan: planName, amount_inr: amount });
      bill(start + gap(), 'payment_succeeded', user, { plan: planName, amount_inr: amount });
      for (let renew = start + 30 * DAY; renew <= now; renew += 30 * DAY) {
        if (cancelAt !== null && cancelAt < renew) {
          bill(cancelAt, 'subscription_cancelled', user, { plan: planName, reason: 'too_expensive' });
          bill(renew, 'subscription_expired', user, { plan: planName });
          return;
        }
        if (failAt !== null && failAt <= renew) {
          bill(renew, 'payment_failed', user, { plan: planName, amount_inr: amount });
          bill(renew + 2 * DAY, 'subscription_expired', user, { plan: planName });
          return;
        }
        bill(renew, 'payment_succeeded', user, { plan: planName, amount_inr: amount });
        bill(renew + gap(), 'subscription_renewed', user, { plan: planName, amount_inr: amount });
      }
      if (cancelAt !== null && cancelAt <= now)
        bill(cancelAt, 'subscription_cancelled', user, { plan: planName, reason: 'moving_on' });
    };
    this.users.forEach((user, i) => {
      switch (i % 6) {
        case 0: // long-standing, renews monthly
          subscribe(user, now - rng.int(70 * DAY, 95 * DAY), null, null);
          break;
        case 1: // new this week
          subscribe(user, now - rng.int(1 * DAY, 6 * DAY), null, null);
          break;
        case 2: // cancels in the last 24 h (churn)
          subscribe(user, now - rng.int(20 * DAY, 28 * DAY), now - rng.int(1 * HOUR, 20 * HOUR), null);
          break;
        case 3: // a renewal fails, the subscription expires two days later
          subscribe(user, now - rng.int(33 * DAY, 36 * DAY), null, now - 7 * DAY);
          break;
        case 4: {
          // joins in the week before last, cancels, comes back yesterday
          const start = now - rng.int(9 * DAY, 13 * DAY);
          subscribe(user, start, now - rng.int(3 * DAY, 6 * DAY), null);
          subscribe(user, now - rng.int(20 * HOUR, 23 * HOUR), null, null);
          break;
        }
        default: // never subscribes; a one-off rental, a declined card
          bill(now - rng.int(1 * DAY, 6 * DAY), 'payment_succeeded', user, { amount_inr: 79, product: 'rental' });
          bill(now - rng.int(8 * DAY, 12 * DAY), 'payment_failed', user, { amount_inr: 79, product: 'rental' });
      }
    });
  }
}

// ---- send order -----------------------------------------------------------------------------------------------

/**
 * One tenant's batches: on-time events by ts (ties in random order: arrival must not matter at equal ts),
 * then the held-back events in random order; then copies of some events in later batches.
 */
function sendOrder(rng: Rng, gen: TenantGen, now: number): OracleEvent[][] {
  const late = new Set<OracleEvent>();
  const candidates = gen.sessions.filter((s) => s.length >= 4);
  const oldOne = candidates.find((s) => (s[0] as OracleEvent).ts < now - 2 * DAY);
  const chosen = new Set(candidates.filter(() => rng.chance(0.2)));
  if (oldOne) chosen.add(oldOne); // at least one late slice days old
  let first = true;
  for (const s of chosen) {
    // A slice that is never the tail: the events after it go first, on time.
    const a = first ? 0 : rng.int(0, s.length - 2); // once, the play_start itself arrives late
    first = false;
    const b = Math.min(s.length - 2, a + rng.int(0, 7));
    for (let i = a; i <= b; i++) late.add(s[i] as OracleEvent);
  }
  for (const e of gen.events) if (e.session_id === undefined && rng.chance(0.1)) late.add(e);

  const keyed = gen.events.filter((e) => !late.has(e)).map((e) => ({ e, k: rng.next() }));
  keyed.sort((x, y) => x.e.ts - y.e.ts || x.k - y.k);
  const sequence = [...keyed.map((x) => x.e), ...rng.shuffle([...late])];

  const batches: OracleEvent[][] = [];
  for (let i = 0; i < sequence.length;) {
    const n = rng.int(80, BATCH_MAX);
    batches.push(sequence.slice(i, i + n));
    i += n;
  }
  // Duplicates: the same event (same event_id) again, in a strictly later batch.
  const tail: OracleEvent[] = [];
  let dups = 0;
  batches.forEach((batch, bi) => {
    for (const e of batch) {
      if (!(rng.chance(0.03) || (dups === 0 && bi === 0))) continue;
      dups++;
      const later = batches.slice(bi + 1).filter((b) => b.length < BATCH_MAX);
      if (later.length > 0 && rng.chance(0.8)) rng.pick(later).push(e);
      else tail.push(e);
    }
  });
  for (let i = 0; i < tail.length; i += BATCH_MAX) batches.push(tail.slice(i, i + BATCH_MAX));
  return batches;
}

export function makeScenario(opts: ScenarioOptions): Scenario {
  const rng = new Rng(opts.seed);
  const perTenant = opts.tenants.map((tenant) => {
    const gen = new TenantGen(rng, tenant, opts.now, opts.sessionsPerTenant);
    gen.run();
    return { tenant, gen, batches: sendOrder(rng, gen, opts.now) };
  });

  const expected: OracleEvent[] = [];
  const events: Scenario['events'] = [];
  for (const { tenant, gen } of perTenant) {
    const sorted = [...gen.events].sort(
      (a, b) => a.ts - b.ts || (a.event_id as string).localeCompare(b.event_id as string),
    );
    for (const e of sorted) {
      expected.push(structuredClone(e));
      events.push({ tenant, event: toIngest(e) });
    }
  }

  // Tenants take turns, as concurrent clients would.
  const batches: Scenario['batches'] = [];
  const most = Math.max(0, ...perTenant.map((x) => x.batches.length));
  for (let i = 0; i < most; i++) {
    for (const { tenant, batches: list } of perTenant) {
      const batch = list[i];
      if (batch) batches.push({ tenant, events: batch.map(toIngest) });
    }
  }
  return { events, batches, expected };
}
