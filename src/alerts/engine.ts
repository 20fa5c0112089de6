import { createHash } from 'node:crypto';
import type { Fields } from '../aggregate/pipeline.js';
import type { SignalMessage } from '../bus/wire.js';
import type { AlertRow } from '../store/alerts.js';
import type { Detector, Finding, OnceDetector, Window, WindowDetector } from './detector.js';

/** §6: an event more than 10 minutes old on arrival raises no alert. */
export const freshMs = 600_000;
/** §7: an incident resolves once its condition has been clear for 5 minutes. */
export const resolveMs = 300_000;

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

interface Incident {
  row: AlertRow;
  eventId: string;
  /** Clock of the last evaluation that found the condition (ms). */
  last: number;
  /** False when it opened during a replay of old input: it is tracked (no second raise) but was never stored. */
  raised: boolean;
}

interface KeyState {
  detector: WindowDetector;
  tenant: string;
  key: string[];
  buckets: Map<number, Fields>;
  firing: Set<number>;
  incident: Incident | null;
}

type SavedKey = [category: string, tenant: string, key: string[], buckets: Array<[number, Fields]>, firing: number[], incident: Incident | null];

export interface SavedDetection {
  v: 1;
  clock: number;
  shards: Array<[number, number]>;
  seen: string[];
  labels: Array<[string, string]>;
  keys: SavedKey[];
}

export interface DetectionOptions {
  detectors: readonly Detector[];
  /** A tenant's thresholds for a category (config/alerts.json and the tenant's overrides). */
  thresholds(tenant: string, category: string): Readonly<Record<string, number>>;
}

const hash = (text: string): Buffer => createHash('sha256').update(text).digest();

/** The alert id and webhook event id of an incident: a function of what it is, so a replay raises the same alert. */
export function alertIdentity(tenant: string, category: string, incident: string): { id: number; eventId: string } {
  const h = hash(`${tenant}\n${category}\n${incident}`);
  return { id: h.readUIntBE(0, 6), eventId: `evt_${h.subarray(6, 18).toString('hex')}` };
}

export function alertRow(tenant: string, id: number, category: string, source: string, f: Finding, clock: number): AlertRow {
  return { tenant, id, category, severity: f.severity, source, title: f.title, description: f.description, data: f.data, created_at: clock, resolved_at: null, version: 1 };
}

/**
 * The alerts role's detection state: the shards' signals summed per detector, key and bucket, each changed bucket
 * evaluated, incidents opened and resolved. A function of the messages applied in order (their `clock` is the only
 * time it knows), so replaying the signals stream after a checkpoint reproduces the same alerts, with the same ids.
 */
export class Detection {
  private readonly keys = new Map<string, KeyState>();
  private readonly bySignal = new Map<string, Detector[]>();
  /** Once-marks this engine has passed on (tenant, category, mark). */
  private readonly seen = new Set<string>();
  /** Names once detectors' keys gave ids, per tenant (`Window.label`). */
  private readonly labels = new Map<string, string>();
  private readonly shards = new Map<number, number>();
  private readonly open = new Set<KeyState>();
  /** The latest arrival time any message carried (ms). */
  clock = 0;
  /** Messages with an older clock may open incidents but raise nothing: the role sets it to "now − 10 min" at start. */
  quietBefore = 0;

  constructor(private readonly options: DetectionOptions) {
    for (const d of options.detectors) {
      const list = this.bySignal.get(d.signal) ?? [];
      list.push(d);
      this.bySignal.set(d.signal, list);
    }
  }

  get openIncidents(): number {
    return this.open.size;
  }

  /** Apply one aggregator batch's signals; a batch already applied (a shard republished it) changes nothing. */
  apply(m: SignalMessage): { changes: AlertChange[]; sightings: Sighting[] } {
    if (m.up_to <= (this.shards.get(m.shard) ?? 0)) return { changes: [], sightings: [] };
    this.shards.set(m.shard, m.up_to);
    if (m.clock > this.clock) this.clock = m.clock;
    const loud = m.clock >= this.quietBefore;
    const sightings: Sighting[] = [];
    const dirty = new Map<KeyState, Map<number, boolean>>();
    for (const [name, fullKey, minute, fields] of m.signals) {
      const detectors = this.bySignal.get(name);
      if (!detectors) continue;
      const [tenant, ...key] = fullKey as [string, ...string[]];
      const fresh = minute * 1000 + 60_000 > m.clock - freshMs;
      for (const d of detectors) {
        if (d.kind === 'once') {
          const label = d.label?.(key);
          if (label && label[1]) this.labels.set(`${tenant}\u0000${label[0]}`, label[1]);
          const mark = `${tenant}\u0000${d.category}\u0000${d.mark(key)}`;
          if (this.seen.has(mark)) continue;
          this.seen.add(mark);
          sightings.push({ tenant, detector: d, key, fields, fresh: fresh && loud });
          continue;
        }
        const st = this.state(d, tenant, key);
        const step = d.bucketMinutes * 60;
        const bucket = Math.floor(minute / step) * step;
        const b = st.buckets.get(bucket);
        if (!b) st.buckets.set(bucket, { ...fields });
        else for (const f in fields) b[f] = (b[f] ?? 0) + fields[f]!;
        let marks = dirty.get(st);
        if (!marks) dirty.set(st, (marks = new Map()));
        marks.set(bucket, (marks.get(bucket) ?? false) || fresh);
      }
    }
    const changes: AlertChange[] = [];
    for (const [st, buckets] of dirty) {
      for (const [bucket, fresh] of [...buckets].sort((a, b) => a[0] - b[0])) this.evaluate(st, bucket, fresh, loud, changes);
    }
    this.resolve(changes);
    return { changes, sightings };
  }

  /** The alerts role's clock tick: time passes without signals, so incidents can resolve and old buckets go. */
  tick(clock: number): AlertChange[] {
    if (clock > this.clock) this.clock = clock;
    const changes: AlertChange[] = [];
    this.resolve(changes);
    this.prune();
    return changes;
  }

  private state(d: WindowDetector, tenant: string, key: string[]): KeyState {
    const id = `${d.category}\u0000${tenant}\u0000${key.join('\u0001')}`;
    let st = this.keys.get(id);
    if (!st) this.keys.set(id, (st = { detector: d, tenant, key, buckets: new Map(), firing: new Set(), incident: null }));
    return st;
  }

  private evaluate(st: KeyState, bucket: number, fresh: boolean, loud: boolean, changes: AlertChange[]): void {
    const d = st.detector;
    const step = d.bucketMinutes * 60;
    let since = bucket;
    for (const b of st.buckets.keys()) if (b < since) since = b;
    const w: Window = {
      key: st.key,
      bucket,
      step,
      since,
      at: (b) => st.buckets.get(b),
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
    for (let i = 1; i < d.running; i++) if (!st.firing.has(bucket - i * step)) return;
    if (st.incident) {
      st.incident.last = this.clock;
      return;
    }
    const { id, eventId } = alertIdentity(st.tenant, d.category, `${st.key.join('\u0001')}\n${bucket}`);
    const row = alertRow(st.tenant, id, d.category, d.source, finding, this.clock);
    st.incident = { row, eventId, last: this.clock, raised: loud };
    this.open.add(st);
    if (loud) changes.push({ row, raised: true, eventId });
  }

  private resolve(changes: AlertChange[]): void {
    for (const st of this.open) {
      const inc = st.incident!;
      if (this.clock - inc.last < resolveMs) continue;
      st.incident = null;
      this.open.delete(st);
      if (inc.raised) changes.push({ row: { ...inc.row, resolved_at: this.clock, version: 2 }, raised: false, eventId: inc.eventId });
    }
  }

  /** Forget buckets older than each detector's history, and keys left with nothing. */
  private prune(): void {
    const now = Math.floor(this.clock / 1000);
    for (const [id, st] of this.keys) {
      const step = st.detector.bucketMinutes * 60;
      const oldest = Math.floor(now / step) * step - (st.detector.historyBuckets - 1) * step;
      for (const b of st.buckets.keys()) if (b < oldest) st.buckets.delete(b);
      for (const b of st.firing) if (b < oldest) st.firing.delete(b);
      if (st.buckets.size === 0 && !st.incident) this.keys.delete(id);
    }
  }

  save(): SavedDetection {
    return {
      v: 1,
      clock: this.clock,
      shards: [...this.shards],
      seen: [...this.seen],
      labels: [...this.labels],
      keys: [...this.keys.values()].map((st) => [st.detector.category, st.tenant, st.key, [...st.buckets], [...st.firing], st.incident]),
    };
  }

  load(s: SavedDetection): void {
    this.clock = s.clock;
    for (const [shard, upTo] of s.shards) this.shards.set(shard, upTo);
    for (const m of s.seen) this.seen.add(m);
    for (const [k, v] of s.labels) this.labels.set(k, v);
    const byCategory = new Map(this.options.detectors.filter((d): d is WindowDetector => d.kind === 'window').map((d) => [d.category, d]));
    for (const [category, tenant, key, buckets, firing, incident] of s.keys) {
      const d = byCategory.get(category);
      if (!d) continue;
      const st = this.state(d, tenant, key);
      for (const [b, f] of buckets) st.buckets.set(b, f);
      for (const b of firing) st.firing.add(b);
      st.incident = incident;
      if (incident) this.open.add(st);
    }
  }
}
