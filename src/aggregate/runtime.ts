import type { WireEvent } from '../bus/wire.js';
import { segmentValues, type Marks, type Pipeline, type Segment, type SessionAttrs } from '../metric/pipeline.js';
import {
  forEachSegment,
  insertEvent,
  rank,
  rankOf,
  tsOf,
  rankOfPacked,
  segmentValue,
  type SegmentSink,
  type Timeline,
} from './session.js';
import { EvictedSessions, type SavedEvicted } from './evicted.js';
import { Accumulator, type EncodedOutput, type Output } from './accumulator.js';
import { contextAttr } from '../bus/event-reader.js';

/** A session's attributes are the first non-empty value in event order; these index its order keys. */
const attr = {
  content: 0,
  region: 1,
  country: 2,
  pop: 3,
  device: 4,
  user: 5,
  anon: 6,
  duration: 7,
  app: 8,
  player: 9,
} as const;
const attrCount = 10;

/** SessionAttrs as the runtime holds them: it alone writes them, in place (pipelines see them read-only). */
type MutableAttrs = { -readonly [K in keyof SessionAttrs]: SessionAttrs[K] };

interface Session extends Timeline {
  attrs: MutableAttrs;
  /** Order key (packed ts and rank) of the event each attribute came from; Infinity before one did. */
  at: number[];
  user: string;
  anon: string;
  lastReceived: number;
  /** Its snapshot is written at the next drain (output only: replay does not depend on it). */
  dirty: boolean;
  /**
   * The watermark when its snapshot fell behind its state (a change that may wait, `snapshotEveryMs`), or -1: not
   * behind, or written at the next drain. State: set only as input is applied, so a replay rebuilds it.
   */
  owedSince: number;
  /** Its owed state was written by an idle flush since it last changed (output only). */
  lingered: boolean;
  /** Detector marks: per kind, the last minute this session was counted in. */
  marks: Record<string, number>;
}

/**
 * Sessions by tenant, then session id. Every event looks its session up: two lookups of the strings the decoder made,
 * rather than joining them into a key per event, which costs an allocation and hashing the joined string each time.
 */
class SessionTable {
  private readonly byTenant = new Map<string, Map<string, Session>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(tenant: string, id: string): Session | undefined {
    return this.byTenant.get(tenant)?.get(id);
  }

  add(s: Session): void {
    let m = this.byTenant.get(s.attrs.tenant);
    if (!m) this.byTenant.set(s.attrs.tenant, (m = new Map<string, Session>()));
    if (!m.has(s.attrs.session_id)) this.count++;
    m.set(s.attrs.session_id, s);
  }

  delete(s: Session): void {
    const m = this.byTenant.get(s.attrs.tenant);
    if (!m?.delete(s.attrs.session_id)) return;
    this.count--;
    if (m.size === 0) this.byTenant.delete(s.attrs.tenant);
  }

  /** Each session; `fn` may delete the one it is given. */
  forEach(fn: (s: Session) => void): void {
    for (const m of this.byTenant.values()) for (const s of m.values()) fn(s);
  }

  clear(): void {
    this.byTenant.clear();
    this.count = 0;
  }
}

/** A session's key, as checkpoints keep it. */
const sessionKey = (tenant: string, id: string): string => `${tenant}\u0000${id}`;

/** A session as a checkpoint stores it. */
type SavedSession = [
  key: string,
  attrs: SessionAttrs,
  at: number[],
  user: string,
  anon: string,
  tl: number[],
  vals: (number[] | null)[] | null,
  names: string[] | null,
  lastReceived: number,
  marks: Record<string, number>,
  owedSince: number,
];

export interface SavedState {
  watermark: number;
  next_sweep: number;
  sessions: SavedSession[];
  evicted: SavedEvicted;
}

/** A session's attributes before any of its events says anything. */
export const noAttrs = (tenant: string, sessionId: string): MutableAttrs => ({
  tenant,
  session_id: sessionId,
  content_id: '',
  region: '',
  country: '',
  pop: '',
  device: '',
  app_version: '',
  player: '',
  viewer: '',
  started_at: null,
  startup_ms: null,
  startup_at: null,
  fatal_at: null,
  closed_at: null,
  ended: false,
  furthest_sec: 0,
  duration_sec: null,
  first_minute: null,
  last_hour: null,
});

/** An event this far behind the shard's clock, for a session memory does not hold, may be one that left memory. */
const recallBehindMs = 3_600_000;

const minuteStart = (ms: number): number => Math.floor(ms / 60_000) * 60_000;
const hourStart = (ms: number): number => Math.floor(ms / 3_600_000) * 3_600_000;

/** One bit per attribute: what an event changed, against what a pipeline reads (`sessionReads`). */
const attrBits = Object.fromEntries(Object.keys(noAttrs('', '')).map((k, i) => [k, 2 ** i])) as Record<
  keyof SessionAttrs,
  number
>;
const readMask = (p: Pipeline): number => (p.sessionReads ? p.sessionReads.reduce((m, k) => m | attrBits[k], 0) : -1);
/** The attributes whose change a snapshot pipeline writes at the next drain (`snapshotNow`; all when it names none). */
const snapshotNowMask = (ps: readonly Pipeline[]): number =>
  ps.reduce((m, p) => m | (p.snapshotNow ? p.snapshotNow.reduce((b, k) => b | attrBits[k], 0) : -1), 0);

const sameDims = (a: SessionAttrs, b: SessionAttrs): boolean =>
  a.content_id === b.content_id &&
  a.region === b.region &&
  a.country === b.country &&
  a.pop === b.pop &&
  a.device === b.device &&
  a.viewer === b.viewer;

/**
 * The aggregator runtime: one per shard. It keeps each session's timeline, feeds the pipelines the contributions
 * that change (segments retracted and added, session attributes before and after), and merges their output per
 * table and key until `drain`. Its state is a function of the events applied, in order, and of nothing else (no
 * clock), so replaying a shard's input rebuilds it exactly.
 */
export class Aggregation implements SegmentSink {
  private readonly sessions = new SessionTable();
  /** Sessions that left memory in the last days, looked up again when they continue. */
  private readonly evicted = new EvictedSessions();
  private acc = new Accumulator();
  private readonly segmentPipes: Pipeline[];
  private readonly sessionPipes: Pipeline[];
  private readonly sessionMasks: number[];
  /** The attributes the last `withEvent` set (attrBits), and what they were before it when it set any. */
  private changed = 0;
  private readonly before: MutableAttrs = noAttrs('', '');
  private readonly marks = new SessionMarks();
  /** The segment given to pipelines (one object, filled for each call), and the attributes it is keyed by. */
  private readonly seg = {
    from: 0,
    to: null,
    state: 0,
    ...Object.fromEntries(segmentValues.map((v) => [v.name, null])),
  } as Segment;
  /** The same object, its values written by name (`segmentValues`: a new one needs no change here). */
  private readonly segValues = this.seg as Record<(typeof segmentValues)[number]['name'], number | string | null>;
  /** The segment values of the event being applied (one array, filled for each event). */
  private readonly carried: (number | string | undefined)[] = segmentValues.map(() => undefined);
  private retracting: SessionAttrs = this.before;
  private adding: SessionAttrs = this.before;
  /** Sessions changed since the last drain, each once. */
  private dirty: Session[] = [];
  /** Sessions whose snapshot waits, in the order they fell behind (`owedSince`); stale entries are skipped. */
  private owed: Session[] = [];
  private owedAt: number[] = [];
  private owedHead = 0;
  /** Whether an owed session changed since the last idle flush (`drainLingering`). */
  private lingerPending = false;
  private readonly snapshotPipes: Pipeline[];
  private readonly urgentMask: number;
  private readonly eventPipes: Pipeline[];
  private readonly activityPipes: Pipeline[];
  /** The latest arrival time applied: the shard's clock, for idle eviction. */
  watermark = 0;
  private nextSweep = 0;

  constructor(
    readonly pipelines: readonly Pipeline[],
    /** A session idle (by arrival) longer than this is dropped from memory. */
    private readonly retainMs: number,
    /**
     * How long (by arrival) a session's snapshot may fall behind a change outside its pipelines' `snapshotNow`
     * (its last event's time, event count, furthest position); 0: every change is written at the next drain.
     */
    private readonly snapshotEveryMs = 0,
  ) {
    this.segmentPipes = pipelines.filter((p) => p.segment !== undefined);
    this.sessionPipes = pipelines.filter((p) => p.session !== undefined);
    this.sessionMasks = this.sessionPipes.map(readMask);
    this.snapshotPipes = pipelines.filter((p) => p.snapshot !== undefined);
    this.urgentMask = snapshotNowMask(this.snapshotPipes);
    this.eventPipes = pipelines.filter((p) => p.event !== undefined);
    this.activityPipes = pipelines.filter((p) => p.activity !== undefined);
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Sessions that left memory and are still remembered. */
  get rememberedCount(): number {
    return this.evicted.size;
  }

  apply(e: WireEvent): void {
    if (e.received_at > this.watermark) this.watermark = e.received_at;
    for (const p of this.eventPipes) p.event!(e, this.acc);
    const r = rankOf(e.event_type, e.event_type === 'error' && e.properties?.fatal === true);
    if (r < 0 || e.session_id === undefined) return;
    let s = this.sessions.get(e.tenant, e.session_id);
    if (!s) {
      s = {
        attrs: noAttrs(e.tenant, e.session_id),
        at: new Array<number>(attrCount).fill(Infinity),
        user: '',
        anon: '',
        tl: [],
        vals: null,
        names: null,
        lastReceived: 0,
        dirty: false,
        owedSince: -1,
        lingered: false,
        marks: {},
      };
      this.sessions.add(s);
    }
    const fresh = s.tl.length === 0;
    const after: SessionAttrs = s.attrs;
    this.withEvent(s, e, r);
    // What the attributes were before this event: a copy taken at their first change, else the attributes themselves.
    const before: SessionAttrs = this.changed === 0 ? after : this.before;
    this.retracting = before;
    this.adding = after;
    const carried = this.carried;
    for (let c = 0; c < segmentValues.length; c++) carried[c] = segmentValues[c]!.read(e);
    if (before === after || sameDims(before, after)) {
      insertEvent(s, e.ts, r, carried, this);
    } else {
      // Every segment is keyed by the old attributes: move them all (rare: a late event carried an earlier value).
      forEachSegment(s, -1, this);
      insertEvent(s, e.ts, r, carried, null);
      forEachSegment(s, 1, this);
    }
    if (r === rank.play_start || r === rank.first_frame) this.withStartup(s);
    const changed = this.changed;
    if (changed !== 0) {
      const out = this.acc;
      for (let i = 0; i < this.sessionPipes.length; i++) {
        // Most events only move `furthest_sec`: a pipeline that reads none of what changed would retract and re-add
        // the same output.
        if ((changed & this.sessionMasks[i]!) === 0) continue;
        const p = this.sessionPipes[i]!;
        if (p.sessionChange) {
          p.sessionChange(this.before, after, out);
          continue;
        }
        p.session!(this.before, -1, out);
        p.session!(after, 1, out);
      }
    }
    if (this.activityPipes.length > 0) {
      this.marks.session = s;
      for (const p of this.activityPipes) p.activity!(after, e, this.marks, this.acc);
    }
    if (e.received_at > s.lastReceived) s.lastReceived = e.received_at;
    if (this.snapshotEveryMs === 0 || fresh || (changed & this.urgentMask) !== 0) this.markDirty(s);
    else if (!s.dirty) {
      if (s.owedSince < 0) {
        s.owedSince = this.watermark;
        this.owed.push(s);
        this.owedAt.push(this.watermark);
      }
      s.lingered = false;
      this.lingerPending = true;
    }
    this.dueOwed();
  }

  /** Its snapshot at the next drain: no longer owed. */
  private markDirty(s: Session): void {
    s.owedSince = -1;
    if (s.dirty) return;
    s.dirty = true;
    this.dirty.push(s);
  }

  /** Owed snapshots whose wait is over by the watermark go out at the next drain. */
  private dueOwed(): void {
    const due = this.watermark - this.snapshotEveryMs;
    const q = this.owed;
    let h = this.owedHead;
    while (h < q.length && this.owedAt[h]! <= due) {
      const s = q[h]!;
      if (s.owedSince === this.owedAt[h]) this.markDirty(s);
      h++;
    }
    if (h > 4096 && h * 2 > q.length) {
      this.owed = q.slice(h);
      this.owedAt = this.owedAt.slice(h);
      h = 0;
    }
    this.owedHead = h;
  }

  /**
   * The sessions (per tenant) of these events that memory does not hold although their earlier events may be in the
   * store: an event of theirs is over an hour behind the shard's clock (a late event), or the session left memory in
   * the last `evictedDays` days (a long pause, then play). Asked before a message is applied, so it depends on the
   * input alone, like the rest of the state.
   */
  lateUnknownSessions(events: readonly WireEvent[]): Map<string, Set<string>> | undefined {
    const horizon = this.watermark - recallBehindMs;
    const anyEvicted = this.evicted.size > 0;
    let out: Map<string, Set<string>> | undefined;
    for (const e of events) {
      const late = e.ts < horizon;
      // Most events are recent, and a shard that has let no session go has nothing to look for: one comparison each.
      // Otherwise a recent event costs a digest of its session and two bits of the filter of those that left.
      if ((!late && !anyEvicted) || e.session_id === undefined) continue;
      if (!late && !this.evicted.has(e.tenant, e.session_id)) continue;
      if (
        rankOf(e.event_type, false) < 0 ||
        this.sessions.get(e.tenant, e.session_id) ||
        out?.get(e.tenant)?.has(e.session_id)
      )
        continue;
      out ??= new Map();
      let ids = out.get(e.tenant);
      if (!ids) out.set(e.tenant, (ids = new Set()));
      ids.add(e.session_id);
    }
    return out;
  }

  /**
   * Apply sessions' stored events, in the order they were first read, without output: the snapshot tables hold them
   * already. The sessions are then as an uninterrupted run would hold them, and a late event changes exactly the
   * segments and attributes it would have changed on time.
   */
  restore(history: readonly WireEvent[]): void {
    const live = this.acc;
    this.acc = new Accumulator();
    try {
      for (const e of history) this.apply(e);
    } finally {
      this.acc = live;
    }
  }

  /** A segment of the session being applied: retracted ones keyed by its attributes before the event, added ones after. */
  onSegment(from: number, to: number | null, state: number, t: Timeline, j: number, sign: 1 | -1): void {
    const seg = this.seg;
    seg.from = from;
    seg.to = to;
    seg.state = state;
    for (let c = 0; c < segmentValues.length; c++) this.segValues[segmentValues[c]!.name] = segmentValue(t, c, j);
    const attrs = sign === 1 ? this.adding : this.retracting;
    for (const p of this.segmentPipes) p.segment!(attrs, seg, sign, this.acc);
  }

  /**
   * Take this event into the session's attributes, in place (all but startup, which needs the timeline). The first
   * change copies them into `before` and every change sets its bit in `changed`: the attributes stay one object per
   * session, so a heartbeat (which moves `furthest_sec`) leaves no copy behind for the collector to promote and sweep.
   */
  private withEvent(s: Session, e: WireEvent, r: number): void {
    const order = e.ts * 128 + r * 8;
    const a = s.attrs;
    const at = s.at;
    this.changed = 0;
    // An attribute is the first non-empty value in event order: only an event ordered before the one it came from
    // (Infinity before any) is read for it, so the usual event decodes none of its rarely read fields.
    let v: string | undefined;
    if (order < at[attr.content]! && (v = e.content_id)) this.take(s, attr.content, order, 'content_id', v);
    if (order < at[attr.region]! && (v = e.region)) this.take(s, attr.region, order, 'region', v);
    if (order < at[attr.country]! && (v = e.country)) this.take(s, attr.country, order, 'country', v);
    if (order < at[attr.pop]! && (v = contextAttr(e, 'pop'))) this.take(s, attr.pop, order, 'pop', v);
    if (order < at[attr.device]! && (v = e.device)) this.take(s, attr.device, order, 'device', v);
    if (order < at[attr.app]! && (v = contextAttr(e, 'app_version'))) this.take(s, attr.app, order, 'app_version', v);
    if (order < at[attr.player]! && (v = contextAttr(e, 'player'))) this.take(s, attr.player, order, 'player', v);
    if (order < at[attr.user]! && (v = e.user_id)) {
      at[attr.user] = order;
      s.user = v;
    }
    if (order < at[attr.anon]! && (v = e.anonymous_id)) {
      at[attr.anon] = order;
      s.anon = v;
    }
    const viewer = s.user || s.anon;
    if (viewer !== a.viewer) this.set(a, 'viewer', viewer);
    if (r === rank.play_start) {
      if (a.started_at === null || e.ts < a.started_at) this.set(a, 'started_at', e.ts);
      const d = e.properties?.duration_sec;
      if (typeof d === 'number' && d > 0 && order < at[attr.duration]!) {
        at[attr.duration] = order;
        this.set(a, 'duration_sec', d);
      }
    }
    if (r === rank.fatal_error && (a.fatal_at === null || e.ts < a.fatal_at)) this.set(a, 'fatal_at', e.ts);
    if (
      (r === rank.fatal_error || r === rank.ended || r === rank.session_end) &&
      (a.closed_at === null || e.ts < a.closed_at)
    )
      this.set(a, 'closed_at', e.ts);
    if (r === rank.ended && !a.ended) this.set(a, 'ended', true);
    if (typeof e.position_sec === 'number' && e.position_sec > a.furthest_sec)
      this.set(a, 'furthest_sec', e.position_sec);
    const minute = minuteStart(e.ts);
    if (a.first_minute === null || minute < a.first_minute) this.set(a, 'first_minute', minute);
    // The hour, not the minute: a playing session's attributes then change once an hour, not every minute.
    const hour = hourStart(e.ts);
    if (a.last_hour === null || hour > a.last_hour) this.set(a, 'last_hour', hour);
  }

  private take(
    s: Session,
    i: number,
    order: number,
    k: 'content_id' | 'region' | 'country' | 'pop' | 'device' | 'app_version' | 'player',
    v: string,
  ): void {
    s.at[i] = order;
    this.set(s.attrs, k, v);
  }

  private set<K extends keyof SessionAttrs>(a: MutableAttrs, k: K, v: SessionAttrs[K]): void {
    if (this.changed === 0) Object.assign(this.before, a);
    a[k] = v;
    this.changed |= attrBits[k];
  }

  /** Startup: the first first_frame at or after the first play_start (docs/metrics.md). */
  private withStartup(s: Session): void {
    let startupMs: number | null = null;
    let startupAt: number | null = null;
    const tl = s.tl;
    const p = tl.findIndex((v) => rankOfPacked(v) === rank.play_start);
    if (p >= 0) {
      for (let j = p + 1; j < tl.length; j++) {
        if (rankOfPacked(tl[j]!) === rank.first_frame) {
          startupAt = tsOf(tl[j]!);
          startupMs = startupAt - tsOf(tl[p]!);
          break;
        }
      }
    }
    if (startupMs !== s.attrs.startup_ms) this.set(s.attrs, 'startup_ms', startupMs);
    if (startupAt !== s.attrs.startup_at) this.set(s.attrs, 'startup_at', startupAt);
  }

  /** The output merged since the last drain; `version` orders this flush's `replace` rows after earlier ones. */
  drain(version: number): Output {
    this.snapshotDirty();
    return this.acc.drain(version);
  }

  /** The same, its rows as the MessagePack a shard publishes. */
  drainEncoded(version: number): EncodedOutput {
    this.snapshotDirty();
    return this.acc.drainEncoded(version);
  }

  private snapshotDirty(): void {
    // A session evicted since it changed was snapshotted then, and is no longer dirty.
    for (const s of this.dirty) if (s.dirty) this.snapshot(s);
    this.dirty = [];
  }

  private snapshot(s: Session): void {
    s.dirty = false;
    this.emitSnapshot(s);
  }

  /**
   * Idle: the rows of every owed session that changed since the last idle flush, at `version`, leaving them owed (the
   * state, which a replay rebuilds from input alone, does not see idle flushes). Undefined when there are none.
   */
  drainLingering(version: number): EncodedOutput | undefined {
    if (!this.lingerPending) return undefined;
    this.lingerPending = false;
    let n = 0;
    for (let h = this.owedHead; h < this.owed.length; h++) {
      const s = this.owed[h]!;
      if (s.owedSince !== this.owedAt[h] || s.lingered) continue;
      s.lingered = true;
      this.emitSnapshot(s);
      n++;
    }
    return n === 0 ? undefined : this.acc.drainEncoded(version);
  }

  private emitSnapshot(s: Session): void {
    const view = {
      attrs: s.attrs,
      first_ts: tsOf(s.tl[0]!),
      last_ts: tsOf(s.tl[s.tl.length - 1]!),
      events: s.tl.length,
    };
    for (const p of this.snapshotPipes) p.snapshot!(view, this.acc);
  }

  /**
   * Forget sessions idle (by arrival) for longer than the retention, at most once per ten minutes of watermark.
   * Driven by the watermark, not the clock, so a replay evicts at the same input as the live run did. `version` is
   * the input just applied: the snapshots of sessions evicted dirty are put at it, so a session recalled (by a later
   * input) and put again in the same flush has the higher version there (Accumulator.putVersion).
   */
  evictIdle(version: number): number {
    if (this.watermark < this.nextSweep) return 0;
    this.nextSweep = this.watermark + 600_000;
    let n = 0;
    this.acc.putVersion = version;
    this.sessions.forEach((s) => {
      if (this.watermark - s.lastReceived > this.retainMs) {
        // Its last change is still owed to the snapshot tables; whether it is depends on flush timing, eviction not.
        if (s.dirty || s.owedSince >= 0) this.snapshot(s);
        s.owedSince = -1;
        this.sessions.delete(s);
        this.evicted.add(s.attrs.tenant, s.attrs.session_id, this.watermark);
        n++;
      }
    });
    this.acc.putVersion = 0;
    return n;
  }

  save(): SavedState {
    const sessions: SavedSession[] = [];
    this.sessions.forEach((s) =>
      sessions.push([
        sessionKey(s.attrs.tenant, s.attrs.session_id),
        s.attrs,
        s.at,
        s.user,
        s.anon,
        s.tl,
        s.vals,
        s.names,
        s.lastReceived,
        s.marks,
        s.owedSince,
      ]),
    );
    return { watermark: this.watermark, next_sweep: this.nextSweep, sessions, evicted: this.evicted.save() };
  }

  /** Start from a checkpoint taken right after a drain: nothing is pending, no session is dirty (some owed). */
  load(state: SavedState): void {
    this.sessions.clear();
    this.acc.clear();
    this.dirty = [];
    const owed: Session[] = [];
    this.watermark = state.watermark;
    this.nextSweep = state.next_sweep;
    this.evicted.load(state.evicted);
    // A session's key is also in its attributes.
    for (const [, attrs, at, user, anon, tl, vals, names, lastReceived, marks, owedSince] of state.sessions) {
      const s: Session = {
        attrs: { ...attrs },
        at,
        user,
        anon,
        tl,
        vals,
        names,
        lastReceived,
        marks,
        owedSince,
        dirty: false,
        lingered: false,
      };
      this.sessions.add(s);
      if (owedSince >= 0) owed.push(s);
    }
    // In the order they fell behind, as the run that saved them held them; an idle flush writes them all again.
    owed.sort((a, b) => a.owedSince - b.owedSince);
    this.owed = owed;
    this.owedAt = owed.map((s) => s.owedSince);
    this.owedHead = 0;
    this.lingerPending = owed.length > 0;
  }

  /** Drop output not yet drained (a replay rebuilding state whose output was already published). */
  discard(): void {
    this.acc.clear();
    for (const s of this.dirty) s.dirty = false;
    this.dirty = [];
  }
}

/** The marks of the session an activity hook is given (one object, pointed at each session in turn). */
class SessionMarks implements Marks {
  session: Session | undefined;

  first(kind: string, minute: number): boolean {
    const marks = this.session!.marks;
    if (marks[kind] === minute) return false;
    // Only the latest minute is remembered: sessions move forward in time, and the marks stay small.
    marks[kind] = minute;
    return true;
  }
}
