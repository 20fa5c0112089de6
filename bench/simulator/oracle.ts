// A deliberately naive reference implementation of docs/metrics.md: the tests' oracle and the simulator's ground
// truth. It keeps every stored event in memory and recomputes each answer from scratch, second by second where the
// document speaks of seconds. It shares no code with src/aggregate, src/store/queries or pipelines/ (only the answers'
// shapes, a module of schemas and types): when the service and this file disagree, one of them misreads docs/metrics.md, and the
// test (or the accuracy report) says which number.

import type { BitrateItem } from '../../pipelines/bitrate/answer.js';
import type { QosItem } from '../../pipelines/qos/answer.js';
import { isInterval } from '../../src/store/queries/answers.js';
import type {
  ConcurrencySeries,
  DeviceItem,
  GeoItem,
  Overview,
  TopContentItem,
} from '../../src/store/queries/answers.js';

export type Range = '24h' | '7d' | '30d' | 'qtd';

/** One event as stored (after de-duplication and timestamp correction). `ts` is Unix milliseconds. */
export interface OracleEvent {
  tenant: string;
  ts: number;
  event_type: string;
  event_id?: string;
  session_id?: string;
  user_id?: string;
  anonymous_id?: string;
  content_id?: string;
  content_title?: string;
  content_type?: string;
  position_sec?: number;
  bitrate_kbps?: number;
  properties?: Record<string, unknown>;
  context?: Record<string, string>;
}

/** QoS over [from, to) (docs/metrics.md "Watch time and QoS"); not an API shape, for pipeline tests. */
export interface Qos {
  watch_sec: number;
  rebuffering_sec: number;
  rebuffer_rate: number;
  sessions_started: number;
  fatal_sessions: number;
  error_rate: number;
  /** Startup times (ms) attributed to instants in the range, ascending. */
  startup_ms: number[];
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** A session counts as concurrent up to 30 s after its last event; a gap counts as watch time up to 30 s. */
const TIMEOUT_MS = 30 * SECOND;
const WATCH_CAP_MS = 30 * SECOND;

const rangeLengths: Record<Exclude<Range, 'qtd'>, number> = { '24h': DAY, '7d': 7 * DAY, '30d': 30 * DAY };

/** docs/metrics.md "Ranges": `to` is the start of the minute after `now`; `qtd` starts at the UTC quarter of `now`. */
export function resolveRange(range: Range, now: number): { from: number; to: number } {
  const to = Math.floor(now / MINUTE) * MINUTE + MINUTE;
  if (range === 'qtd') {
    const d = new Date(now);
    return { from: Date.UTC(d.getUTCFullYear(), Math.floor(d.getUTCMonth() / 3) * 3, 1), to };
  }
  return { from: to - rangeLengths[range], to };
}

// ---- sessions -------------------------------------------------------------------------------------------------

type State = 'starting' | 'playing' | 'rebuffering' | 'paused' | 'closed';

/** The thirteen playback types; their events with a session_id make up sessions. */
const sessionTypes = new Set([
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
]);

function isFatal(e: OracleEvent): boolean {
  return e.event_type === 'error' && e.properties?.fatal === true;
}

/** The tie order at equal `ts`, as listed in docs/metrics.md "Order". */
const tieOrder = [
  'play_start',
  'rebuffer_start',
  'first_frame',
  'resume',
  'seek_start',
  'seek_end',
  'rebuffer_end',
  'heartbeat',
  'bitrate_change',
  'error(non-fatal)',
  'pause',
  'error(fatal)',
  'ended',
  'session_end',
];

export function tieRank(e: OracleEvent): number {
  const key = e.event_type === 'error' ? (isFatal(e) ? 'error(fatal)' : 'error(non-fatal)') : e.event_type;
  return tieOrder.indexOf(key);
}

function stateAfter(before: State | null, e: OracleEvent): State | null {
  switch (e.event_type) {
    case 'play_start':
      return 'starting';
    case 'first_frame':
    case 'resume':
    case 'seek_end':
    case 'rebuffer_end':
      return 'playing';
    case 'heartbeat':
      return before === 'rebuffering' ? 'rebuffering' : 'playing';
    case 'rebuffer_start':
      return 'rebuffering';
    case 'pause':
      return 'paused';
    case 'ended':
    case 'session_end':
      return 'closed';
    case 'error':
      return isFatal(e) ? 'closed' : before;
    default:
      // seek_start, bitrate_change keep the state
      return before;
  }
}

function isActive(s: State | null): boolean {
  return s === 'starting' || s === 'playing' || s === 'rebuffering';
}

/** A piece of watch time, attributed to the instant `at` (the ts of the second event of the pair). */
interface WatchPiece {
  at: number;
  ms: number;
  rebufferingMs: number;
}

interface Session {
  id: string;
  /** Events in docs/metrics.md order, with the state after each. */
  events: OracleEvent[];
  states: Array<State | null>;
  firstTs: number;
  lastTs: number;
  contentId: string;
  region: string;
  country: string;
  pop: string;
  device: string;
  viewer: string | null;
  watch: WatchPiece[];
  /** The same watch time, each piece with the bitrate it played at (null: not known yet). */
  renditions: Array<{ at: number; ms: number; kbps: number | null }>;
  reachedEnded: boolean;
  /** The largest position_sec of any of its events (0 when none carries one). */
  furthestPosition: number;
  /** duration_sec of its first play_start that has one. */
  startDuration: number | null;
}

function firstNonEmpty(events: OracleEvent[], get: (e: OracleEvent) => string | undefined): string {
  for (const e of events) {
    const v = get(e);
    if (v !== undefined && v !== '') return v;
  }
  return '';
}

/** A usable content length: a positive finite number of seconds (anything else counts as not given). */
function durationOf(e: OracleEvent): number | null {
  const d = e.properties?.duration_sec;
  return typeof d === 'number' && Number.isFinite(d) && d > 0 ? d : null;
}

function buildSession(id: string, unsorted: OracleEvent[]): Session {
  const events = [...unsorted].sort((a, b) => a.ts - b.ts || tieRank(a) - tieRank(b));
  const states: Array<State | null> = [];
  let state: State | null = null;
  for (const e of events) {
    state = stateAfter(state, e);
    states.push(state);
  }
  const watch: WatchPiece[] = [];
  for (let i = 0; i + 1 < events.length; i++) {
    const s = states[i];
    if (s !== 'playing' && s !== 'rebuffering') continue;
    const e2 = events[i + 1] as OracleEvent;
    const ms = Math.min(e2.ts - (events[i] as OracleEvent).ts, WATCH_CAP_MS);
    watch.push({ at: e2.ts, ms, rebufferingMs: s === 'rebuffering' ? ms : 0 });
  }
  // docs/metrics.md "Bitrate": at equal ts and rank, events with a bitrate first, lowest first, then those without.
  const byRendition = [...events].sort(
    (a, b) =>
      a.ts - b.ts || tieRank(a) - tieRank(b) || (a.bitrate_kbps ?? Infinity) - (b.bitrate_kbps ?? Infinity) || 0,
  );
  const renditions: Session['renditions'] = [];
  let kbps: number | null = null;
  let played: State | null = null;
  for (let i = 0; i + 1 < byRendition.length; i++) {
    const e1 = byRendition[i] as OracleEvent;
    played = stateAfter(played, e1);
    if (e1.bitrate_kbps !== undefined) kbps = e1.bitrate_kbps;
    if (played !== 'playing' && played !== 'rebuffering') continue;
    const at = (byRendition[i + 1] as OracleEvent).ts;
    renditions.push({ at, ms: Math.min(at - e1.ts, WATCH_CAP_MS), kbps });
  }
  const user = firstNonEmpty(events, (e) => e.user_id);
  const anonymous = firstNonEmpty(events, (e) => e.anonymous_id);
  let startDuration: number | null = null;
  for (const e of events) {
    if (e.event_type !== 'play_start') continue;
    startDuration = durationOf(e);
    if (startDuration !== null) break;
  }
  let furthest = 0;
  for (const e of events)
    if (typeof e.position_sec === 'number' && e.position_sec > furthest) furthest = e.position_sec;
  return {
    id,
    events,
    states,
    firstTs: (events[0] as OracleEvent).ts,
    lastTs: (events[events.length - 1] as OracleEvent).ts,
    contentId: firstNonEmpty(events, (e) => e.content_id),
    region: firstNonEmpty(events, (e) => e.context?.region),
    country: firstNonEmpty(events, (e) => e.context?.country),
    pop: firstNonEmpty(events, (e) => e.context?.pop),
    device: firstNonEmpty(events, (e) => e.context?.device_type),
    viewer: user !== '' ? user : anonymous !== '' ? anonymous : null,
    watch,
    renditions,
    reachedEnded: events.some((e) => e.event_type === 'ended'),
    furthestPosition: furthest,
    startDuration,
  };
}

function sessionInRange(s: Session, from: number, to: number): boolean {
  return s.firstTs < to && s.lastTs >= from;
}

function watchMsIn(s: Session, from: number, to: number): number {
  let ms = 0;
  for (const w of s.watch) if (w.at >= from && w.at < to) ms += w.ms;
  return ms;
}

/** (last − before) / before × 100, with docs/metrics.md's rules for a zero `before`. */
function delta(last: number, before: number): number {
  if (before === 0) return last === 0 ? 0 : 100;
  return ((last - before) / before) * 100;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

const subscriptionTypes = new Set([
  'subscription_started',
  'subscription_renewed',
  'subscription_cancelled',
  'subscription_expired',
]);

interface TenantData {
  sessions: Session[];
  /** Subscription events per user, sorted by ts. */
  subscriptions: Map<string, OracleEvent[]>;
  payments: OracleEvent[];
  published: Map<string, OracleEvent[]>;
  /** Every event carrying a content_id, per content_id (for titles of unpublished content). */
  byContent: Map<string, OracleEvent[]>;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

export class Oracle {
  private readonly tenants = new Map<string, TenantData>();

  constructor(events: readonly OracleEvent[]) {
    const sessionEvents = new Map<string, Map<string, OracleEvent[]>>();
    for (const e of events) {
      const t = this.tenant(e.tenant);
      if (sessionTypes.has(e.event_type) && e.session_id !== undefined && e.session_id !== '') {
        let perTenant = sessionEvents.get(e.tenant);
        if (!perTenant) sessionEvents.set(e.tenant, (perTenant = new Map<string, OracleEvent[]>()));
        push(perTenant, e.session_id, e);
      }
      if (subscriptionTypes.has(e.event_type) && e.user_id) push(t.subscriptions, e.user_id, e);
      if (e.event_type === 'payment_succeeded') t.payments.push(e);
      if (e.content_id) {
        push(t.byContent, e.content_id, e);
        if (e.event_type === 'content_published') push(t.published, e.content_id, e);
      }
    }
    for (const [tenant, perTenant] of sessionEvents) {
      const t = this.tenant(tenant);
      for (const [id, list] of perTenant) t.sessions.push(buildSession(id, list));
    }
    for (const t of this.tenants.values()) {
      for (const list of t.subscriptions.values())
        list.sort((a, b) => a.ts - b.ts || subscriptionTieRank(a) - subscriptionTieRank(b));
      for (const list of t.published.values()) list.sort((a, b) => a.ts - b.ts);
      for (const list of t.byContent.values()) list.sort((a, b) => a.ts - b.ts);
    }
  }

  private tenant(name: string): TenantData {
    let t = this.tenants.get(name);
    if (!t) {
      t = { sessions: [], subscriptions: new Map(), payments: [], published: new Map(), byContent: new Map() };
      this.tenants.set(name, t);
    }
    return t;
  }

  private data(tenant: string): TenantData {
    return (
      this.tenants.get(tenant) ?? {
        sessions: [],
        subscriptions: new Map(),
        payments: [],
        published: new Map(),
        byContent: new Map(),
      }
    );
  }

  private sessionsIn(tenant: string, from: number, to: number): Session[] {
    return this.data(tenant).sessions.filter((s) => sessionInRange(s, from, to));
  }

  private viewersIn(tenant: string, from: number, to: number): number {
    const viewers = new Set<string>();
    for (const s of this.sessionsIn(tenant, from, to)) if (s.viewer !== null) viewers.add(s.viewer);
    return viewers.size;
  }

  private watchMs(tenant: string, from: number, to: number): number {
    let ms = 0;
    for (const s of this.data(tenant).sessions) ms += watchMsIn(s, from, to);
    return ms;
  }

  /** Users whose latest subscription event strictly before `at` is a start or a renewal. */
  private paidAt(tenant: string, at: number): number {
    let n = 0;
    for (const list of this.data(tenant).subscriptions.values()) {
      let latest: OracleEvent | undefined;
      for (const e of list) if (e.ts < at) latest = e;
      if (latest && (latest.event_type === 'subscription_started' || latest.event_type === 'subscription_renewed')) n++;
    }
    return n;
  }

  private revenue(tenant: string, from: number, to: number): number {
    let sum = 0;
    for (const p of this.data(tenant).payments) {
      const amount = p.properties?.amount_inr;
      if (p.ts >= from && p.ts < to && typeof amount === 'number') sum += amount;
    }
    return sum;
  }

  overview(tenant: string, range: Range, now: number): Overview {
    const { from, to } = resolveRange(range, now);
    const paid = this.paidAt(tenant, to);
    const churned = new Set<string>();
    for (const [user, list] of this.data(tenant).subscriptions) {
      if (
        list.some(
          (e) =>
            (e.event_type === 'subscription_cancelled' || e.event_type === 'subscription_expired') &&
            e.ts >= from &&
            e.ts < to,
        )
      )
        churned.add(user);
    }
    const paidAtFrom = this.paidAt(tenant, from);
    const weekStart = to - 7 * DAY;
    const priorStart = to - 14 * DAY;
    return {
      monthly_active_users: this.viewersIn(tenant, to - 30 * DAY, to),
      watch_hours: this.watchMs(tenant, from, to) / HOUR,
      paid_subscribers: paid,
      arpu_inr: paid === 0 ? 0 : this.revenue(tenant, from, to) / paid,
      churn_pct: paidAtFrom === 0 ? 0 : (churned.size / paidAtFrom) * 100,
      wow_delta: {
        mau: delta(this.viewersIn(tenant, weekStart, to), this.viewersIn(tenant, priorStart, weekStart)),
        watch_hours: delta(
          this.watchMs(tenant, weekStart, to) / HOUR,
          this.watchMs(tenant, priorStart, weekStart) / HOUR,
        ),
        subs: delta(this.paidAt(tenant, to), this.paidAt(tenant, weekStart)),
        revenue: delta(this.revenue(tenant, weekStart, to), this.revenue(tenant, priorStart, weekStart)),
      },
    };
  }

  /**
   * Concurrent sessions at every whole second of the range. Each event of a session is "the last event at or
   * before t" for the seconds t from its ts up to (not including) the next event's ts; it counts at those seconds
   * that are also at most 30 s after it, when the state after it is active. Seconds with nobody are absent (0).
   */
  concurrencyBySecond(tenant: string, from: number, to: number): Map<number, number> {
    const count = new Map<number, number>();
    for (const s of this.data(tenant).sessions) {
      for (let i = 0; i < s.events.length; i++) {
        if (!isActive(s.states[i] ?? null)) continue;
        const e = s.events[i] as OracleEvent;
        const next = s.events[i + 1];
        const untilExclusive = Math.min(next ? next.ts : Infinity, e.ts + TIMEOUT_MS + 1, to);
        for (let t = Math.max(Math.ceil(e.ts / SECOND) * SECOND, from); t < untilExclusive; t += SECOND) {
          count.set(t, (count.get(t) ?? 0) + 1);
        }
      }
    }
    return count;
  }

  concurrency(tenant: string, range: Range, intervalMinutes: number, now: number): ConcurrencySeries {
    if (!isInterval(intervalMinutes)) throw new Error(`bad interval ${intervalMinutes}`);
    const { from, to } = resolveRange(range, now);
    const step = intervalMinutes * MINUTE;
    const firstPoint = Math.floor(from / step) * step;
    const lastPoint = Math.floor((to - SECOND) / step) * step;
    const values = new Map<number, number>();
    for (let p = firstPoint; p <= lastPoint; p += step) values.set(p, 0);
    let peak = 0;
    let peakAt = from;
    const bySecond = [...this.concurrencyBySecond(tenant, from, to)].sort((a, b) => a[0] - b[0]);
    for (const [t, n] of bySecond) {
      const p = Math.floor(t / step) * step;
      values.set(p, Math.max(values.get(p) ?? 0, n));
      if (n > peak) {
        peak = n;
        peakAt = t;
      }
    }
    return {
      interval_minutes: intervalMinutes,
      points: [...values].map(([p, value]) => ({ ts: iso(p), value })),
      peak,
      peak_at: iso(peakAt),
    };
  }

  /** The content's latest content_published, if any. */
  private latestPublished(tenant: string, contentId: string): OracleEvent | undefined {
    const list = this.data(tenant).published.get(contentId);
    return list ? list[list.length - 1] : undefined;
  }

  private describeContent(tenant: string, contentId: string): { title: string; content_type: string } {
    const published = this.latestPublished(tenant, contentId);
    if (published) return { title: published.content_title ?? '', content_type: published.content_type ?? '' };
    // Else each from the latest event that carries it.
    const events = this.data(tenant).byContent.get(contentId) ?? [];
    let title = '';
    let type = '';
    for (const e of events) {
      if (e.content_title) title = e.content_title;
      if (e.content_type) type = e.content_type;
    }
    return { title, content_type: type };
  }

  topContent(tenant: string, range: Range, now: number): TopContentItem[] {
    const { from, to } = resolveRange(range, now);
    const groups = new Map<string, Session[]>();
    for (const s of this.sessionsIn(tenant, from, to)) if (s.contentId !== '') push(groups, s.contentId, s);
    const rows: TopContentItem[] = [];
    for (const [contentId, sessions] of groups) {
      const published = this.latestPublished(tenant, contentId);
      const publishedDuration = published ? durationOf(published) : null;
      let watchMs = 0;
      let pctSum = 0;
      let pctCount = 0;
      const viewers = new Set<string>();
      for (const s of sessions) {
        watchMs += watchMsIn(s, from, to);
        if (s.viewer !== null) viewers.add(s.viewer);
        const duration = s.startDuration ?? publishedDuration;
        if (s.reachedEnded) {
          pctSum += 100;
          pctCount++;
        } else if (duration !== null) {
          pctSum += Math.min(100, (s.furthestPosition / duration) * 100);
          pctCount++;
        }
      }
      rows.push({
        content_id: contentId,
        ...this.describeContent(tenant, contentId),
        watch_hours: watchMs / HOUR,
        completion_pct: pctCount === 0 ? 0 : pctSum / pctCount,
        unique_viewers: viewers.size,
      });
    }
    return rows.sort((a, b) => b.watch_hours - a.watch_hours || compareText(a.content_id, b.content_id));
  }

  geo(tenant: string, range: Range, now: number): GeoItem[] {
    const { from, to } = resolveRange(range, now);
    const groups = new Map<string, Session[]>();
    for (const s of this.sessionsIn(tenant, from, to)) push(groups, s.region === '' ? 'unknown' : s.region, s);
    const totalMs = this.watchMs(tenant, from, to);
    const rows: GeoItem[] = [];
    for (const [region, sessions] of groups) {
      let ms = 0;
      const viewers = new Set<string>();
      for (const s of sessions) {
        ms += watchMsIn(s, from, to);
        if (s.viewer !== null) viewers.add(s.viewer);
      }
      rows.push({
        region,
        watch_hours: ms / HOUR,
        viewers: viewers.size,
        share_pct: totalMs === 0 ? 0 : (ms / totalMs) * 100,
      });
    }
    return rows.sort((a, b) => b.watch_hours - a.watch_hours || compareText(a.region, b.region));
  }

  /**
   * `GET /v1/analytics/qos`: QoS per session region. A startup percentile is the nearest-rank startup time, reported
   * as the upper bound of the 5 % wide bucket (1.05^(b-1), 1.05^b] ms holding it (docs/metrics.md).
   */
  qosByRegion(tenant: string, range: Range, now: number): QosItem[] {
    const { from, to } = resolveRange(range, now);
    const rows: QosItem[] = [];
    for (const region of new Set(this.data(tenant).sessions.map((s) => s.region))) {
      const q = this.qos(tenant, from, to, { region });
      if (q.watch_sec === 0 && q.sessions_started === 0 && q.fatal_sessions === 0 && q.startup_ms.length === 0)
        continue;
      rows.push({
        region: region === '' ? 'unknown' : region,
        watch_hours: (q.watch_sec * SECOND) / HOUR,
        rebuffer_rate: q.rebuffer_rate,
        startups: q.startup_ms.length,
        startup_p50_ms: bucketBound(nearestRank(q.startup_ms, 0.5)),
        startup_p95_ms: bucketBound(nearestRank(q.startup_ms, 0.95)),
        sessions_started: q.sessions_started,
        fatal_sessions: q.fatal_sessions,
        error_rate: q.error_rate,
      });
    }
    return rows.sort((a, b) => b.watch_hours - a.watch_hours || compareText(a.region, b.region));
  }

  /** QoS of the sessions of a tenant (optionally of one region and/or pop) over [from, to). */
  qos(tenant: string, from: number, to: number, where: { region?: string; pop?: string } = {}): Qos {
    let watchMs = 0;
    let rebufferingMs = 0;
    let started = 0;
    let fatal = 0;
    const startup: number[] = [];
    const inside = (at: number): boolean => at >= from && at < to;
    for (const s of this.data(tenant).sessions) {
      if ((where.region !== undefined && s.region !== where.region) || (where.pop !== undefined && s.pop !== where.pop))
        continue;
      for (const w of s.watch) {
        if (!inside(w.at)) continue;
        watchMs += w.ms;
        rebufferingMs += w.rebufferingMs;
      }
      const startIndex = s.events.findIndex((e) => e.event_type === 'play_start');
      if (startIndex >= 0) {
        const start = s.events[startIndex] as OracleEvent;
        if (inside(start.ts)) started++;
        const frame = s.events.slice(startIndex + 1).find((e) => e.event_type === 'first_frame');
        if (frame && inside(frame.ts)) startup.push(frame.ts - start.ts);
      }
      const firstFatal = s.events.find(isFatal);
      if (firstFatal && inside(firstFatal.ts)) fatal++;
    }
    return {
      watch_sec: watchMs / SECOND,
      rebuffering_sec: rebufferingMs / SECOND,
      rebuffer_rate: watchMs === 0 ? 0 : (rebufferingMs / watchMs) * 100,
      sessions_started: started,
      fatal_sessions: fatal,
      error_rate: started === 0 ? 0 : (fatal / started) * 100,
      startup_ms: startup.sort((a, b) => a - b),
    };
  }

  /** `GET /v1/analytics/bitrate`: watch time per rendition bucket, per session region and device. */
  bitrate(tenant: string, range: Range, now: number): BitrateItem[] {
    const { from, to } = resolveRange(range, now);
    const edges = [0, 500, 1000, 2000, 4000, 8000, 16_000, Infinity];
    const groups = new Map<string, { region: string; device: string; ms: number[]; kbpsMs: number }>();
    for (const s of this.data(tenant).sessions) {
      const region = s.region === '' ? 'unknown' : s.region;
      const device = s.device === '' ? 'unknown' : s.device;
      const id = JSON.stringify([region, device]);
      for (const w of s.renditions) {
        if (w.at < from || w.at >= to || w.ms === 0) continue;
        let g = groups.get(id);
        if (!g) groups.set(id, (g = { region, device, ms: new Array<number>(8).fill(0), kbpsMs: 0 }));
        // Index 0 to 6 by the edges, 7 for unknown.
        const b = w.kbps === null ? 7 : edges.findIndex((e, i) => w.kbps! >= e && w.kbps! < edges[i + 1]!);
        g.ms[b] = g.ms[b]! + w.ms;
        if (w.kbps !== null) g.kbpsMs += w.kbps * w.ms;
      }
    }
    const rows: BitrateItem[] = [];
    for (const g of groups.values()) {
      const total = g.ms.reduce((a, b) => a + b, 0);
      const known = total - g.ms[7]!;
      rows.push({
        region: g.region,
        device: g.device,
        watch_hours: total / HOUR,
        avg_bitrate_kbps: known === 0 ? null : g.kbpsMs / known,
        renditions: g.ms.flatMap((ms, b) => {
          if (ms === 0) return [];
          const min = b === 7 ? null : edges[b]!;
          const max = b === 7 || b === 6 ? null : edges[b + 1]!;
          const bucket = (
            b === 7 ? 'unknown' : max === null ? `${min}+` : `${min}-${max}`
          ) as BitrateItem['renditions'][number]['bucket'];
          return [{ bucket, min_kbps: min, max_kbps: max, watch_hours: ms / HOUR, share_pct: (ms / total) * 100 }];
        }),
      });
    }
    return rows.sort(
      (a, b) => b.watch_hours - a.watch_hours || compareText(a.region, b.region) || compareText(a.device, b.device),
    );
  }

  devices(tenant: string, range: Range, now: number): DeviceItem[] {
    const { from, to } = resolveRange(range, now);
    const sessions = this.sessionsIn(tenant, from, to);
    const counts = new Map<string, number>();
    for (const s of sessions) {
      const device = s.device === '' ? 'unknown' : s.device;
      counts.set(device, (counts.get(device) ?? 0) + 1);
    }
    return [...counts]
      .map(([device, n]) => ({ device, sessions: n, share_pct: (n / sessions.length) * 100 }))
      .sort((a, b) => b.sessions - a.sessions || compareText(a.device, b.device));
  }
}

/**
 * Subscription events of one user at the same ts: docs/metrics.md does not order them. Taken in lifecycle order
 * (started, renewed, cancelled, expired), so the later stage wins; scenarios avoid such ties.
 */
function subscriptionTieRank(e: OracleEvent): number {
  return ['subscription_started', 'subscription_renewed', 'subscription_cancelled', 'subscription_expired'].indexOf(
    e.event_type,
  );
}

/** Byte order of the UTF-8 strings (what ClickHouse's ORDER BY on a String does); code point order is the same. */
/** The value at rank ⌈p·n⌉ of ascending `sorted` (undefined when empty). */
function nearestRank(sorted: readonly number[], p: number): number | undefined {
  return sorted.length === 0 ? undefined : sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)];
}

/** The upper bound, in whole ms, of the 5 % bucket holding `ms`: bucket 0 holds up to 1 ms (0 when there is none). */
function bucketBound(ms: number | undefined): number {
  if (ms === undefined) return 0;
  return ms <= 1 ? 1 : Math.round(1.05 ** Math.ceil(Math.log(ms) / Math.log(1.05)));
}

function compareText(a: string, b: string): number {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return Buffer.compare(x, y);
}
