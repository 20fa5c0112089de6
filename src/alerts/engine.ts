import { createHash } from 'node:crypto';
import type { Fields } from '../metric/pipeline.js';
import type { SignalMessage } from '../bus/wire.js';
import type { AlertRow } from '../store/alerts.js';
import type { Detector, Finding, OnceDetector, Window, WindowDetector } from '../metric/detector.js';

/** §6: an event more than 10 minutes old on arrival raises no alert. */
export const freshMs = 600_000;
/** §7: an incident resolves once its condition has been clear for 5 minutes (and a whole bucket: `resolve`). */
export const resolveMs = 300_000;
/** A shard heard from within this much clock is waited for before an alert is raised (see `Held`). */
export const shardLiveMs = 10_000;
/** The longest an alert waits for lagging shards: past it, it is raised with what they have reported. */
export const maxHoldMs = 60_000;

/** A version of an alert to store, and whether it was just raised (then it is also delivered and pushed live). */
export interface AlertChange {
  row: AlertRow;
  raised: boolean;
  /** The webhook event id: the same for every republication of one alert. */
  eventId: string;
}

/** A first sighting the cluster may not have seen: the role takes a once-mark in KV and raises if it got it. */
export interface Sighting {
  tenant: string;
  detector: OnceDetector;
  key: readonly string[];
  fields: Fields;
  /** Raising is allowed (fresh on arrival, not a replay of old input). */
  fresh: boolean;
}

/**
 * An incident found but not yet raised. Each shard reports its part of every bucket, and one can run ahead of the
 * others: the condition may hold on its part alone, which is too few sessions to name a cohort, or not hold on the
 * whole. So the alert waits until every live shard has applied what arrived before the clock it was found at, then
 * is raised as the latest finding describes it, or dropped if no bucket from the one it was found in fires any more.
 */
interface Held {
  /** The data clock (arrival time) of the batch that found it: every live shard must have reached it. */
  until: number;
  /** Clock when it was found. */
  since: number;
  /** The bucket it was found in: findings in earlier ones do not change it. */
  bucket: number;
  /** Found on fresh input (see `Detection.quietBefore`): raising is allowed. */
  loud: boolean;
}

interface Incident {
  row: AlertRow;
  eventId: string;
  /** Clock of the last evaluation that found the condition (ms). */
  last: number;
  /** False when it opened during a replay of old input: it is tracked (no second raise) but was never stored. */
  raised: boolean;
  held: Held | null;
}

/** What the engine knows of a shard: its last batch, its data clock and when it was last heard from. */
interface ShardState {
  upTo: number;
  watermark: number;
  heard: number;
}

interface KeyState {
  detector: WindowDetector;
  tenant: string;
  key: string[];
  buckets: Map<number, Fields>;
  /** The buckets of the detector's `cohortSignal`. */
  cohorts: Map<number, Fields>;
  firing: Set<number>;
  incident: Incident | null;
}

type SavedKey = [
  category: string,
  tenant: string,
  key: string[],
  buckets: Array<[number, Fields]>,
  firing: number[],
  incident: Incident | null,
  cohorts: Array<[number, Fields]>,
];

export interface SavedDetection {
  v: 3;
  clock: number;
  shards: Array<[shard: number, upTo: number, watermark: number, heard: number]>;
  seen: string[];
  labels: Array<[string, string]>;
  keys: SavedKey[];
  budget: SavedHour[];
}

export interface DetectionOptions {
  detectors: readonly Detector[];
  /** A tenant's thresholds for a category (config/alerts.json and the tenant's overrides). */
  thresholds(tenant: string, category: string): Readonly<Record<string, number>>;
  /** Alerts of one category raised per tenant and UTC hour; past it, one summary alert stands for the rest. */
  maxPerHour?: number;
  /** Keys (regions, pops, contents) one category keeps per tenant; later ones are summed under `other`. */
  maxKeys?: number;
}

export const defaultMaxPerHour = 20;
export const defaultMaxKeys = 500;
/** Once-marks and labels kept in memory, least recently seen dropped first (a dropped mark costs a KV read). */
export const rememberedMarks = 100_000;

/** Counter names one bucket holds at most (error codes and cohorts included): see `Detection.add`. */
export const maxFields = 2000;

/** The key that stands for every key of a category past a tenant's `maxKeys`. */
export const otherKey = 'other';

const hash = (text: string): Buffer => createHash('sha256').update(text).digest();

/** The alert id and webhook event id of an incident: a function of what it is, so a replay raises the same alert. */
export function alertIdentity(tenant: string, category: string, incident: string): { id: number; eventId: string } {
  const h = hash(`${tenant}\n${category}\n${incident}`);
  return { id: h.readUIntBE(0, 6), eventId: `evt_${h.subarray(6, 18).toString('hex')}` };
}

export function alertRow(
  tenant: string,
  id: number,
  category: string,
  source: string,
  f: Finding,
  clock: number,
): AlertRow {
  return { tenant, id, category, source, ...describe(f), created_at: clock, resolved_at: null, version: 1 };
}

/** What a finding says of an alert. */
function describe(f: Finding): Pick<AlertRow, 'severity' | 'title' | 'description' | 'data'> {
  return { severity: f.severity, title: f.title, description: f.description, data: f.data };
}

/** Remove and re-add: a Set or Map used as a recency list keeps its most recently touched entries last. */
function touch<K, V>(m: Map<K, V>, k: K, v: V, max: number): void {
  m.delete(k);
  m.set(k, v);
  if (m.size > max) m.delete(m.keys().next().value as K);
}

interface Hour {
  tenant: string;
  category: string;
  source: string;
  /** Start of the UTC hour (ms). */
  hour: number;
  raised: number;
  suppressed: number;
  summary: AlertChange | null;
}

type SavedHour = [
  tenant: string,
  category: string,
  source: string,
  hour: number,
  raised: number,
  suppressed: number,
  summary: AlertChange | null,
];

/**
 * How many alerts each tenant and category raised in the current UTC hour. Past the cap one summary alert is raised
 * (and resolved, with the final count, when the hour ends); the rest are tracked but not raised, so a flood of
 * made-up content ids or regions from a public ingest key cannot send a webhook each.
 */
export class RaiseBudget {
  private readonly hours = new Map<string, Hour>();

  constructor(private readonly max: number) {}

  /** Whether one more alert may be raised at `clock`; the summary's raise goes to `changes` at the first refusal. */
  take(tenant: string, category: string, source: string, clock: number, changes: AlertChange[]): boolean {
    const hour = Math.floor(clock / 3_600_000) * 3_600_000;
    const id = `${tenant}\u0000${category}`;
    let h = this.hours.get(id);
    if (!h || h.hour !== hour) {
      if (h) this.close(h, clock, changes);
      this.hours.set(id, (h = { tenant, category, source, hour, raised: 0, suppressed: 0, summary: null }));
    }
    if (h.raised < this.max) {
      h.raised++;
      return true;
    }
    h.suppressed++;
    if (!h.summary) {
      const { id: alertId, eventId } = alertIdentity(tenant, category, `cap\n${hour}`);
      h.summary = { row: alertRow(tenant, alertId, category, source, this.finding(h), clock), raised: true, eventId };
      changes.push(h.summary);
    }
    return false;
  }

  /** Resolve the summaries of hours that ended by `clock`, and forget those hours. */
  closeEnded(clock: number, changes: AlertChange[]): void {
    for (const [id, h] of this.hours) {
      if (clock < h.hour + 3_600_000) continue;
      this.close(h, clock, changes);
      this.hours.delete(id);
    }
  }

  private close(h: Hour, clock: number, changes: AlertChange[]): void {
    if (!h.summary) return;
    const f = this.finding(h);
    changes.push({
      row: { ...h.summary.row, description: f.description, data: f.data, resolved_at: clock, version: 2 },
      raised: false,
      eventId: h.summary.eventId,
    });
  }

  private finding(h: Hour): Finding {
    const at = new Date(h.hour).toISOString().slice(11, 16);
    return {
      severity: 'warning',
      title: `More than ${this.max} ${h.category} alerts within an hour`,
      description: `Past ${this.max} ${h.category} alerts in the hour from ${at} UTC, the rest are not raised one by one: ${h.suppressed} so far`,
      data: {
        severity: 'warning',
        summary: true,
        max_per_hour: this.max,
        suppressed: h.suppressed,
        hour: new Date(h.hour).toISOString(),
      },
    };
  }

  save(): SavedHour[] {
    return [...this.hours.values()].map((h) => [
      h.tenant,
      h.category,
      h.source,
      h.hour,
      h.raised,
      h.suppressed,
      h.summary,
    ]);
  }

  load(saved: readonly SavedHour[]): void {
    for (const [tenant, category, source, hour, raised, suppressed, summary] of saved) {
      this.hours.set(`${tenant}\u0000${category}`, { tenant, category, source, hour, raised, suppressed, summary });
    }
  }
}

/**
 * The alerts role's detection state: the shards' signals summed per detector, key and bucket, each changed bucket
 * evaluated, incidents opened and resolved. A function of the messages applied in order (their `clock` is the only
 * time it knows), so replaying the signals stream after a checkpoint reproduces the same alerts, with the same ids.
 */
export class Detection {
  private readonly keys = new Map<string, KeyState>();
  /** Keys held per tenant and category, for `maxKeys`. */
  private readonly keyCounts = new Map<string, number>();
  private readonly bySignal = new Map<string, Detector[]>();
  private readonly byCohortSignal = new Map<string, WindowDetector[]>();
  /** Once-marks this engine has passed on (tenant, category, mark), most recently seen last. */
  private readonly seen = new Map<string, true>();
  /** Names once detectors' keys gave ids, per tenant (`Window.label`), most recently seen last. */
  private readonly labels = new Map<string, string>();
  readonly budget: RaiseBudget;
  private readonly maxKeys: number;
  private readonly shards = new Map<number, ShardState>();
  private readonly open = new Set<KeyState>();
  /** Field names per bucket, once a bucket took a new one (`add`). */
  private readonly fieldCounts = new WeakMap<Fields, number>();
  /** The latest arrival time any message carried, or tick (ms). */
  clock = 0;
  /** Messages with an older clock may open incidents but raise nothing: the role sets it to "now − 10 min" at start. */
  quietBefore = 0;

  constructor(private readonly options: DetectionOptions) {
    this.budget = new RaiseBudget(options.maxPerHour ?? defaultMaxPerHour);
    this.maxKeys = options.maxKeys ?? defaultMaxKeys;
    for (const d of options.detectors) {
      const list = this.bySignal.get(d.signal) ?? [];
      list.push(d);
      this.bySignal.set(d.signal, list);
      if (d.kind === 'window' && d.cohortSignal)
        this.byCohortSignal.set(d.cohortSignal, [...(this.byCohortSignal.get(d.cohortSignal) ?? []), d]);
    }
  }

  get openIncidents(): number {
    return this.open.size;
  }

  /** Apply one aggregator batch's signals; a batch already applied (a shard republished it) changes nothing. */
  apply(m: SignalMessage): { changes: AlertChange[]; sightings: Sighting[] } {
    const shard = this.shards.get(m.shard);
    if (m.up_to <= (shard?.upTo ?? 0)) return { changes: [], sightings: [] };
    if (m.clock > this.clock) this.clock = m.clock;
    this.shards.set(m.shard, { upTo: m.up_to, watermark: Math.max(m.clock, shard?.watermark ?? 0), heard: this.clock });
    const loud = m.clock >= this.quietBefore;
    const sightings: Sighting[] = [];
    const dirty = new Map<KeyState, Map<number, boolean>>();
    for (const [name, fullKey, at, fields] of m.signals) {
      const cohortOf = this.byCohortSignal.get(name);
      const detectors = this.bySignal.get(name);
      if (!cohortOf && !detectors) continue;
      const [tenant, ...key] = fullKey as [string, ...string[]];
      // A cohort signal is kept beside its detectors' buckets and evaluates nothing.
      for (const d of cohortOf ?? []) this.add(this.state(d, tenant, key).cohorts, d, at, fields);
      if (!detectors) continue;
      // The minute holding the bucket ends at most a minute after the bucket's start.
      const fresh = at * 1000 + 60_000 > m.clock - freshMs;
      for (const d of detectors) {
        if (d.kind === 'once') {
          const label = d.label?.(key);
          if (label && label[1]) touch(this.labels, `${tenant}\u0000${label[0]}`, label[1], rememberedMarks);
          const mark = `${tenant}\u0000${d.category}\u0000${d.mark(key)}`;
          const known = this.seen.has(mark);
          touch(this.seen, mark, true, rememberedMarks);
          if (known) continue;
          sightings.push({ tenant, detector: d, key, fields, fresh: fresh && loud });
          continue;
        }
        const st = this.state(d, tenant, key);
        const bucket = this.add(st.buckets, d, at, fields);
        let marks = dirty.get(st);
        if (!marks) dirty.set(st, (marks = new Map<number, boolean>()));
        marks.set(bucket, (marks.get(bucket) ?? false) || fresh);
      }
    }
    const changes: AlertChange[] = [];
    for (const [st, buckets] of dirty) {
      for (const [bucket, fresh] of [...buckets].sort((a, b) => a[0] - b[0]))
        this.evaluate(st, bucket, fresh, loud, m.clock);
    }
    this.release(changes);
    this.resolve(changes);
    this.budget.closeEnded(this.clock, changes);
    return { changes, sightings };
  }

  /**
   * Add a message's counters of `at` into their bucket of `buckets` (made when new); returns the bucket's start.
   * Field names carry error codes and cohort values (titles, app versions) from clients: past `maxFields` a bucket
   * takes no new name, so made-up ones cannot grow it without bound.
   */
  private add(buckets: Map<number, Fields>, d: WindowDetector, at: number, fields: Fields): number {
    const step = d.bucketSeconds;
    const bucket = Math.floor(at / step) * step;
    let b = buckets.get(bucket);
    if (!b) buckets.set(bucket, (b = {}));
    let count = this.fieldCounts.get(b);
    for (const f in fields) {
      const v = b[f];
      if (v !== undefined) {
        b[f] = v + fields[f]!;
        continue;
      }
      count ??= Object.keys(b).length;
      if (count >= maxFields) continue;
      b[f] = fields[f]!;
      count++;
    }
    if (count !== undefined) this.fieldCounts.set(b, count);
    return bucket;
  }

  /** The alerts role's clock tick: time passes without signals, so incidents can resolve and old buckets go. */
  tick(clock: number): AlertChange[] {
    if (clock > this.clock) this.clock = clock;
    const changes: AlertChange[] = [];
    this.release(changes);
    this.resolve(changes);
    this.budget.closeEnded(this.clock, changes);
    this.prune();
    return changes;
  }

  /** A key's state; past the tenant's `maxKeys` for the category, a new key is summed under `other`. */
  private state(d: WindowDetector, tenant: string, key: string[]): KeyState {
    const id = `${d.category}\u0000${tenant}\u0000${key.join('\u0001')}`;
    const st = this.keys.get(id);
    if (st) return st;
    const counted = `${d.category}\u0000${tenant}`;
    const held = this.keyCounts.get(counted) ?? 0;
    if (held >= this.maxKeys && key.some((k) => k !== otherKey))
      return this.state(
        d,
        tenant,
        key.map(() => otherKey),
      );
    const made: KeyState = {
      detector: d,
      tenant,
      key,
      buckets: new Map(),
      cohorts: new Map(),
      firing: new Set(),
      incident: null,
    };
    this.keys.set(id, made);
    this.keyCounts.set(counted, held + 1);
    return made;
  }

  /** Evaluate a bucket a batch changed; `until`: the batch's data clock. */
  private evaluate(st: KeyState, bucket: number, fresh: boolean, loud: boolean, until: number): void {
    const d = st.detector;
    const step = d.bucketSeconds;
    let since = bucket;
    for (const b of st.buckets.keys()) if (b < since) since = b;
    const w: Window = {
      key: st.key,
      bucket,
      step,
      since,
      at: (b) => st.buckets.get(b),
      cohorts: (b) => st.cohorts.get(b),
      firing: (b) => st.firing.has(b),
      label: (id) => this.labels.get(`${st.tenant}\u0000${id}`) ?? '',
      thresholds: this.options.thresholds(st.tenant, d.category),
    };
    const finding = d.evaluate(w);
    if (!finding) {
      st.firing.delete(bucket);
      return;
    }
    st.firing.add(bucket);
    if (!fresh) return;
    if (!finding.now) for (let i = 1; i < d.running; i++) if (!st.firing.has(bucket - i * step)) return;
    const inc = st.incident;
    if (inc) {
      inc.last = this.clock;
      if (inc.held && bucket >= inc.held.bucket) inc.row = { ...inc.row, ...describe(finding) };
      return;
    }
    const { id, eventId } = alertIdentity(st.tenant, d.category, `${st.key.join('\u0001')}\n${bucket}`);
    const row = alertRow(st.tenant, id, d.category, d.source, finding, this.clock);
    st.incident = {
      row,
      eventId,
      last: this.clock,
      raised: false,
      held: { until, since: this.clock, bucket, loud },
    };
    this.open.add(st);
  }

  /** Whether every shard heard from lately has applied what arrived before `h.until`, or it has waited long enough. */
  private settled(h: Held): boolean {
    if (this.clock - h.since >= maxHoldMs) return true;
    for (const s of this.shards.values()) if (s.watermark < h.until && this.clock - s.heard < shardLiveMs) return false;
    return true;
  }

  /** Raise the held incidents whose shards have all reported, as last evaluated; drop those that no longer hold. */
  private release(changes: AlertChange[]): void {
    for (const st of this.open) {
      const inc = st.incident!;
      const h = inc.held;
      if (!h || !this.settled(h)) continue;
      inc.held = null;
      // The whole of the data no longer crosses (a partial minute after it may not have yet, which is no matter).
      if (![...st.firing].some((b) => b >= h.bucket)) {
        st.incident = null;
        this.open.delete(st);
        continue;
      }
      const d = st.detector;
      inc.row = { ...inc.row, created_at: this.clock };
      // Past the hour's cap the incident is tracked (raised once, resolved once) but not raised.
      inc.raised = h.loud && this.budget.take(st.tenant, d.category, d.source, this.clock, changes);
      if (inc.raised) changes.push({ row: inc.row, raised: true, eventId: inc.eventId });
    }
  }

  /**
   * Resolve the incidents clear for 5 minutes and for the whole bucket after their last firing one. An hour's first
   * minutes hold too few cancellations or sessions to cross an hourly condition: judged on them alone, a churn spike
   * or a completion drop that goes on would be resolved at the turn of the hour and raised again when it crosses.
   */
  private resolve(changes: AlertChange[]): void {
    for (const st of this.open) {
      const inc = st.incident!;
      if (inc.held || this.clock - inc.last < resolveMs) continue;
      let latest = -Infinity;
      for (const b of st.firing) if (b > latest) latest = b;
      if (this.clock < (latest + 2 * st.detector.bucketSeconds) * 1000) continue;
      st.incident = null;
      this.open.delete(st);
      if (inc.raised)
        changes.push({ row: { ...inc.row, resolved_at: this.clock, version: 2 }, raised: false, eventId: inc.eventId });
    }
  }

  /** Forget buckets older than each detector's history, and keys left with nothing. */
  private prune(): void {
    const now = Math.floor(this.clock / 1000);
    for (const [id, st] of this.keys) {
      const step = st.detector.bucketSeconds;
      const current = Math.floor(now / step) * step;
      const oldest = current - (st.detector.historyBuckets - 1) * step;
      const oldestCohort = current - ((st.detector.cohortHistoryBuckets ?? st.detector.historyBuckets) - 1) * step;
      for (const b of st.buckets.keys()) if (b < oldest) st.buckets.delete(b);
      for (const b of st.cohorts.keys()) if (b < oldestCohort) st.cohorts.delete(b);
      for (const b of st.firing) if (b < oldest) st.firing.delete(b);
      if (st.buckets.size === 0 && st.cohorts.size === 0 && !st.incident) {
        this.keys.delete(id);
        const counted = `${st.detector.category}\u0000${st.tenant}`;
        const held = (this.keyCounts.get(counted) ?? 1) - 1;
        if (held > 0) this.keyCounts.set(counted, held);
        else this.keyCounts.delete(counted);
      }
    }
  }

  save(): SavedDetection {
    return {
      v: 3,
      clock: this.clock,
      shards: [...this.shards].map(([shard, s]) => [shard, s.upTo, s.watermark, s.heard]),
      seen: [...this.seen.keys()],
      labels: [...this.labels],
      keys: [...this.keys.values()].map((st) => [
        st.detector.category,
        st.tenant,
        st.key,
        [...st.buckets],
        [...st.firing],
        st.incident,
        [...st.cohorts],
      ]),
      budget: this.budget.save(),
    };
  }

  load(s: SavedDetection): void {
    this.clock = s.clock;
    for (const [shard, upTo, watermark, heard] of s.shards) this.shards.set(shard, { upTo, watermark, heard });
    for (const m of s.seen) this.seen.set(m, true);
    for (const [k, v] of s.labels) this.labels.set(k, v);
    this.budget.load(s.budget);
    const byCategory = new Map(
      this.options.detectors.filter((d): d is WindowDetector => d.kind === 'window').map((d) => [d.category, d]),
    );
    for (const [category, tenant, key, buckets, firing, incident, cohorts] of s.keys) {
      const d = byCategory.get(category);
      if (!d) continue;
      const st = this.state(d, tenant, key);
      for (const [b, f] of buckets) st.buckets.set(b, f);
      for (const [b, f] of cohorts) st.cohorts.set(b, f);
      for (const b of firing) st.firing.add(b);
      st.incident = incident;
      if (incident) this.open.add(st);
    }
  }
}
