// A fleet of video players and a billing server, second by second in simulated time. Each player is one viewer's
// session: it starts, shows its first frame after a startup time, sends a heartbeat every 10 s, stalls, pauses,
// seeks, changes bitrate, hits errors, and leaves (a page-unload beacon, an in-app close, or nothing at all when the
// app is killed). Like a player SDK, it sends its queued events with each heartbeat, at its first frame and when it
// leaves. Everything comes from one seeded generator: the same options give the same events.

import type { OracleEvent } from './oracle.js';
import { Rng } from './rng.js';
import { catalogue, devices, ladder, matchAudience, places, type Content, type Device, type Place } from './world.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const heartbeatMs = 10 * SECOND;

export type IncidentKind = 'rebuffer' | 'startup' | 'errors' | 'payments';
export type CohortDimension = 'device' | 'app_version' | 'player' | 'content';

/** An injected problem, from `start` for `length` ms after the match starts; `region`/`pop` narrow it. */
export interface Incident {
  kind: IncidentKind;
  start: number;
  length: number;
  region?: string;
  pop?: string;
  /** Narrows it to one cohort of its scope: sessions of one device type, app version, player or title. */
  cohort?: { dimension: CohortDimension; value: string };
  /**
   * How bad, as a multiple of the normal rate (stalls, slow startups, doomed starts) or the failing share of
   * payments: each kind's fixed default when absent. A near miss stays under the detectors' thresholds.
   */
  magnitude?: number;
}

export interface FleetOptions {
  tenant: string;
  /** Concurrent viewers at the peak of the match. */
  viewers: number;
  /** Simulated time of the first ball (ms). */
  startAt: number;
  durationMs: number;
  seed: number;
  incidents: readonly Incident[];
  /** The audience at `x` ∈ [0, 1] of the run as a share of `viewers`: a cricket final's by default. */
  audience?: (x: number) => number;
  /** How far playback at `t` (ms since the start) differs from the normal, by place and device: none by default. */
  levels?: (t: number, region: string, pop: string, device: string) => Levels;
  /**
   * Whether every viewer leaves at the run's end, as at a match's: true by default. A span of a day stops mid-stream
   * instead, since an audience leaving at once is a completion drop the day does not have.
   */
  leaveAtEnd?: boolean;
}

/** Multipliers of the normal stall rate, startup time and fatal-error rate. */
export interface Levels {
  stall: number;
  startup: number;
  fatal: number;
}

/** One request a client makes: a player's or the billing server's batch, or a page-unload beacon. */
export interface Delivery {
  via: 'events' | 'beacon';
  events: OracleEvent[];
}

/** How playback behaves for one session at one instant. */
interface Conditions {
  stallPerSecond: number;
  stallMs: readonly [number, number];
  startupFactor: number;
  /** Added to every startup (an incident's slow path). */
  startupExtraMs: number;
  /** Chance that a session starting now fails fatally within its first minute. */
  doomedAtStart: number;
  fatalPerSecond: number;
}

const normal: Conditions = {
  stallPerSecond: 0.0015,
  stallMs: [800, 4000],
  startupFactor: 1,
  startupExtraMs: 0,
  doomedAtStart: 0.004,
  fatalPerSecond: 0.00002,
};

interface Viewer {
  anonymousId: string;
  userId?: string;
  place: Place;
  pop: string;
  device: Device;
  appVersion: string;
  active: boolean;
}

type PlayState = 'starting' | 'playing' | 'stalled' | 'paused';

interface Player {
  viewer: Viewer;
  session: string;
  content: Content;
  state: PlayState;
  /** ms offset inside each second at which this player acts, so that players do not all act at once. */
  phase: number;
  firstFrameAt: number;
  nextHeartbeat: number;
  /** When the current stall or pause ends. */
  until: number;
  position: number;
  bitrate: number;
  doomedAt: number;
  /** The latest ts of its events: a session's events never go back in time, nor share a ts. */
  lastTs: number;
  queue: OracleEvent[];
}

export interface FleetStats {
  sessions: number;
  peakPlayers: number;
}

/** A session's value of a cohort dimension, as its events' context says it. */
function cohortValue(dimension: CohortDimension, v: Viewer, content: Content): string {
  if (dimension === 'device') return v.device.device_type;
  if (dimension === 'app_version') return v.appVersion;
  if (dimension === 'player') return v.device.player;
  return content.content_id;
}

export class Fleet {
  private readonly rng: Rng;
  private readonly viewers: Viewer[] = [];
  private readonly players = new Set<Player>();
  private readonly billing: OracleEvent[] = [];
  /** Start of the next second to simulate. */
  private clock: number;
  private sessionCount = 0;
  private peak = 0;
  private readonly meanSessionMs: number;
  private readonly subscribers: string[] = [];
  /** The billing server's latest ts: one event per millisecond at most, so no user has two events at one instant. */
  private billedTs = 0;

  constructor(private readonly o: FleetOptions) {
    this.rng = new Rng(o.seed);
    this.clock = o.startAt;
    // Short matches get short sessions, so that the audience turns over within the run as it does in a long one.
    this.meanSessionMs = Math.min(20 * MINUTE, Math.max(2 * MINUTE, o.durationMs / 4));
    const loggedIn = Math.round(o.viewers * 1.5 * 0.7);
    for (let i = 0; i < loggedIn; i++) this.subscribers.push(`u-${i}`);
  }

  get endAt(): number {
    return this.o.startAt + this.o.durationMs;
  }

  get done(): boolean {
    return this.clock > this.endAt;
  }

  get stats(): FleetStats {
    return { sessions: this.sessionCount, peakPlayers: this.peak };
  }

  /** Simulate every whole second that ends by `to`; returns the requests the clients make meanwhile. */
  advance(to: number): Delivery[] {
    const out: Delivery[] = [];
    while (this.clock + SECOND <= Math.min(to, this.endAt + SECOND) && !this.done) {
      if (this.clock < this.endAt) this.second(this.clock, out);
      else if (this.o.leaveAtEnd === false) this.flushBilling(out);
      else this.closeAll(this.clock, out);
      this.clock += SECOND;
    }
    return out;
  }

  private second(t: number, out: Delivery[]): void {
    const x = (t - this.o.startAt) / this.o.durationMs;
    const target = this.o.viewers * (this.o.audience ?? matchAudience)(x);
    const active = this.players.size;
    const baseLeave = SECOND / this.meanSessionMs;
    // New arrivals fill the gap to the curve, and replace those who leave on their own.
    const arrivals = Math.max(0, target - active) * 0.05 + active * baseLeave;
    for (let n = this.poisson(arrivals); n > 0; n--) this.join(t);
    const leave = baseLeave + (active > target ? ((active - target) / active) * 0.05 : 0);
    for (const p of this.players) this.play(p, t, leave, out);
    this.peak = Math.max(this.peak, this.players.size);
    this.bill(t, out);
  }

  private poisson(mean: number): number {
    // Enough for arrivals per second: the whole part, and one more with the fractional part's chance.
    const whole = Math.floor(mean);
    return whole + (this.rng.chance(mean - whole) ? 1 : 0);
  }

  /** Whether the incident is under way at `t`. */
  private during(i: Incident, t: number): boolean {
    const from = this.o.startAt + i.start;
    return t >= from && t < from + i.length;
  }

  private conditions(t: number, v: Viewer, content: Content): Conditions {
    let c = normal;
    if (this.o.levels) {
      const l = this.o.levels(t - this.o.startAt, v.place.region, v.pop, v.device.device_type);
      c = {
        ...c,
        stallPerSecond: c.stallPerSecond * l.stall,
        startupFactor: c.startupFactor * l.startup,
        doomedAtStart: c.doomedAtStart * l.fatal,
        fatalPerSecond: c.fatalPerSecond * l.fatal,
      };
    }
    for (const i of this.o.incidents) {
      if (!this.during(i, t)) continue;
      if (i.region !== undefined && i.region !== v.place.region) continue;
      if (i.pop !== undefined && i.pop !== v.pop) continue;
      if (i.cohort && i.cohort.value !== cohortValue(i.cohort.dimension, v, content)) continue;
      if (i.kind === 'rebuffer')
        c =
          i.magnitude === undefined
            ? { ...c, stallPerSecond: 0.03, stallMs: [2000, 8000] }
            : { ...c, stallPerSecond: c.stallPerSecond * i.magnitude };
      if (i.kind === 'startup')
        c =
          i.magnitude === undefined
            ? { ...c, startupFactor: 3 * c.startupFactor, startupExtraMs: 1200 }
            : { ...c, startupFactor: c.startupFactor * i.magnitude };
      if (i.kind === 'errors')
        c =
          i.magnitude === undefined
            ? { ...c, doomedAtStart: 0.25, fatalPerSecond: 0.002 }
            : {
                ...c,
                doomedAtStart: Math.min(1, c.doomedAtStart * i.magnitude),
                fatalPerSecond: c.fatalPerSecond * i.magnitude,
              };
    }
    return c;
  }

  private viewer(): Viewer {
    // Returning viewers (the same ids) most of the time, as a live audience has; a new one when all are watching.
    for (let tries = 0; tries < 4 && this.viewers.length > 0; tries++) {
      const v = this.rng.pick(this.viewers);
      if (!v.active) return v;
    }
    const place = this.rng.weighted(places.map((p) => [p, p.population] as const));
    const v: Viewer = {
      anonymousId: `a-${this.rng.hex(12)}`,
      place,
      pop: this.rng.chance(0.7) ? place.pops[0]! : this.rng.pick(place.pops),
      device: this.rng.weighted(devices.map((d) => [d, d.weight] as const)),
      appVersion: this.rng.pick(['5.12.0', '5.12.1', '5.13.0']),
      active: false,
    };
    if (this.rng.chance(0.7)) v.userId = this.rng.pick(this.subscribers);
    this.viewers.push(v);
    return v;
  }

  private event(t: number, type: string, fields: Partial<OracleEvent>, v?: Viewer): OracleEvent {
    const e: OracleEvent = { tenant: this.o.tenant, ts: t, event_type: type, event_id: this.rng.uuid(), ...fields };
    if (v) {
      e.anonymous_id = v.anonymousId;
      if (v.userId !== undefined) e.user_id = v.userId;
      e.context = {
        country: 'IN',
        region: v.place.region,
        pop: v.pop,
        cdn: 'akamai',
        device_type: v.device.device_type,
        os: v.device.os,
        player: v.device.player,
        app_version: v.appVersion,
      };
    }
    return e;
  }

  private join(t: number): void {
    const v = this.viewer();
    v.active = true;
    const content = this.rng.weighted(catalogue.map((x) => [x, x.weight] as const));
    const c = this.conditions(t, v, content);
    const phase = this.rng.int(0, 999);
    const at = t + phase;
    // Startup: about 0.9 s, skewed, with a long tail (a sum of uniforms, squared).
    const u = (this.rng.next() + this.rng.next() + this.rng.next()) / 1.5;
    const startupMs = Math.round(300 + 600 * u * u * c.startupFactor + c.startupExtraMs);
    const p: Player = {
      viewer: v,
      session: `sess-${this.rng.hex(16)}`,
      content,
      state: 'starting',
      phase,
      firstFrameAt: at + startupMs,
      nextHeartbeat: 0,
      until: 0,
      position:
        content.duration === null ? 0 : this.rng.chance(0.2) ? this.rng.int(0, Math.floor(content.duration / 2)) : 0,
      bitrate: this.rng.pick(ladder.slice(1, 4)),
      doomedAt: this.rng.chance(c.doomedAtStart) ? at + startupMs + this.rng.int(1, 60) * SECOND : Infinity,
      lastTs: at,
      queue: [],
    };
    const fields: Partial<OracleEvent> = {
      session_id: p.session,
      content_id: content.content_id,
      content_title: content.content_title,
      content_type: content.content_type,
    };
    if (content.duration !== null) fields.properties = { duration_sec: content.duration };
    p.queue.push(this.event(at, 'play_start', fields, v));
    this.players.add(p);
    this.sessionCount++;
  }

  private emit(p: Player, at: number, type: string, fields: Partial<OracleEvent> = {}): void {
    p.lastTs = Math.max(at, p.lastTs + 1);
    p.queue.push(this.event(p.lastTs, type, { session_id: p.session, ...fields }, p.viewer));
  }

  private flush(p: Player, out: Delivery[], via: Delivery['via'] = 'events'): void {
    if (p.queue.length === 0) return;
    out.push({ via, events: p.queue });
    p.queue = [];
  }

  /** One second of one player. */
  private play(p: Player, t: number, leaveChance: number, out: Delivery[]): void {
    const end = t + SECOND;
    const at = t + p.phase;
    const c = this.conditions(t, p.viewer, p.content);
    if (p.state === 'starting') {
      if (p.firstFrameAt >= end) return;
      this.emit(p, p.firstFrameAt, 'first_frame', { position_sec: p.position });
      p.state = 'playing';
      p.nextHeartbeat = p.firstFrameAt + heartbeatMs;
      this.flush(p, out);
      return;
    }
    if ((p.state === 'stalled' || p.state === 'paused') && p.until < end) {
      this.emit(p, p.until, p.state === 'stalled' ? 'rebuffer_end' : 'resume', {
        position_sec: Math.floor(p.position),
      });
      p.state = 'playing';
    }
    if (p.state === 'playing') p.position++;
    if (p.doomedAt < end || (p.state !== 'paused' && this.rng.chance(c.fatalPerSecond))) {
      this.emit(p, at, 'error', {
        position_sec: Math.floor(p.position),
        properties: {
          fatal: true,
          code: this.rng.pick(['MEDIA_ERR_DECODE', 'DRM_LICENSE_FAILED', 'MANIFEST_LOAD_ERROR']),
        },
      });
      this.leave(p, out, 'events');
      return;
    }
    if (p.content.duration !== null && p.position >= p.content.duration) {
      this.emit(p, at, 'ended', { position_sec: p.content.duration });
      this.leave(p, out, 'events');
      return;
    }
    if (p.state === 'playing') this.act(p, at, c);
    if (p.nextHeartbeat < end) {
      this.emit(p, p.nextHeartbeat, 'heartbeat', { position_sec: Math.floor(p.position) });
      p.nextHeartbeat += heartbeatMs;
      this.flush(p, out);
    }
    if (this.rng.chance(leaveChance)) {
      // A page unload mostly (sendBeacon), else an in-app close; an app killed outright sends nothing.
      const how = this.rng.next();
      if (how < 0.9) this.emit(p, at + 1, 'session_end', { position_sec: Math.floor(p.position) });
      this.leave(p, out, how < 0.6 ? 'beacon' : 'events');
    }
  }

  /** What a playing session may do in a second: stall, pause, seek, switch bitrate, hit a recoverable error. */
  private act(p: Player, at: number, c: Conditions): void {
    const r = this.rng.next();
    const seekable = p.content.duration !== null;
    if (r < c.stallPerSecond) {
      this.emit(p, at, 'rebuffer_start', { position_sec: Math.floor(p.position) });
      p.state = 'stalled';
      p.until = at + this.rng.int(c.stallMs[0], c.stallMs[1]);
      // Players step down after a stall.
      const lower = ladder[Math.max(0, ladder.indexOf(p.bitrate) - 1)]!;
      if (lower !== p.bitrate) {
        p.bitrate = lower;
        this.emit(p, at + 1, 'bitrate_change', { bitrate_kbps: lower, position_sec: Math.floor(p.position) });
      }
    } else if (r < c.stallPerSecond + 0.0006) {
      this.emit(p, at, 'pause', { position_sec: Math.floor(p.position) });
      p.state = 'paused';
      p.until = at + this.rng.int(5, 90) * SECOND;
    } else if (seekable && r < c.stallPerSecond + 0.0026) {
      this.emit(p, at, 'seek_start', { position_sec: Math.floor(p.position) });
      p.position = this.rng.int(0, (p.content.duration as number) - 1);
      this.emit(p, at + this.rng.int(100, 400), 'seek_end', { position_sec: p.position });
    } else if (r < c.stallPerSecond + 0.0056) {
      const i = ladder.indexOf(p.bitrate);
      const next = ladder[Math.min(ladder.length - 1, i + 1)]!;
      if (next !== p.bitrate) {
        p.bitrate = next;
        this.emit(p, at, 'bitrate_change', { bitrate_kbps: next, position_sec: Math.floor(p.position) });
      }
    } else if (r < c.stallPerSecond + 0.006) {
      this.emit(p, at, 'error', {
        position_sec: Math.floor(p.position),
        properties: { fatal: false, code: 'SEGMENT_RETRY' },
      });
    }
  }

  private leave(p: Player, out: Delivery[], via: Delivery['via']): void {
    this.flush(p, out, via);
    p.viewer.active = false;
    this.players.delete(p);
  }

  /** The last ball: every player closes the stream. */
  private closeAll(t: number, out: Delivery[]): void {
    for (const p of this.players) {
      this.emit(p, t + p.phase, 'session_end', { position_sec: Math.floor(p.position) });
      this.leave(p, out, 'beacon');
    }
    this.flushBilling(out);
  }

  /** The billing server: renewals through the match, sign-ups from new viewers, some cancellations; sent every 5 s. */
  private bill(t: number, out: Delivery[]): void {
    const at = (): number => (this.billedTs = Math.max(t + this.rng.int(0, 999), this.billedTs + 1));
    const failing = this.o.incidents.find((i) => i.kind === 'payments' && this.during(i, t));
    const failPct = failing ? (failing.magnitude ?? 0.7) : 0.04;
    for (let n = this.poisson(this.o.viewers / 20_000); n > 0; n--) {
      const user = this.rng.pick(this.subscribers);
      const [plan, amount] = this.rng.pick([
        ['mobile', 149],
        ['premium', 299],
        ['premium-annual', 1499],
      ] as const);
      if (this.rng.chance(failPct)) {
        this.billing.push(
          this.event(at(), 'payment_failed', {
            user_id: user,
            properties: {
              amount_inr: amount,
              plan,
              reason: this.rng.pick(['bank_declined', 'upi_timeout', 'gateway_error']),
            },
          }),
        );
      } else {
        this.billing.push(
          this.event(at(), 'payment_succeeded', { user_id: user, properties: { amount_inr: amount, plan } }),
        );
        this.billing.push(
          this.event(at(), 'subscription_renewed', { user_id: user, properties: { amount_inr: amount, plan } }),
        );
      }
    }
    for (let n = this.poisson(this.o.viewers / 200_000); n > 0; n--) {
      this.billing.push(
        this.event(at(), 'subscription_cancelled', {
          user_id: this.rng.pick(this.subscribers),
          properties: { reason: 'too_expensive' },
        }),
      );
    }
    if ((t - this.o.startAt) % (5 * SECOND) === 0) this.flushBilling(out);
  }

  private flushBilling(out: Delivery[]): void {
    if (this.billing.length === 0) return;
    out.push({ via: 'events', events: this.billing.splice(0) });
  }
}
