import { pipelines } from '../../pipelines/index.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import { loadConfig } from '../../src/config/load.js';
import { Detection, type AlertChange } from '../../src/alerts/engine.js';
import { detectors, effective, loadThresholds, type Thresholds } from '../../src/metric/thresholds.js';
import { partitionKey, shardOf, type WireEvent } from '../../src/bus/wire.js';
import type { AlertRow } from '../../src/store/alerts.js';
import type { OracleEvent } from './oracle.js';

// The aggregator's shards and the alerts role's engine wired as in a running cluster, without NATS, on event time:
// what the detection benchmark and the detection tests run, so that a simulated day takes minutes.

export interface Raised {
  category: string;
  tenant: string;
  /** The arrival clock when it was raised or resolved (ms). */
  at: number;
  row: AlertRow;
}

export interface DetectOptions {
  overrides?: Thresholds;
  /** A new active alerts process, from a checkpoint of the state, once arrival time reaches this. */
  restartAt?: number;
  /** Aggregator shards, events routed to them as ingest routes them (1 by default). */
  shards?: number;
  /** How far behind arrival each shard applies its events (ms; none by default): shards that report apart. */
  lagMs?: readonly number[];
}

interface Shard {
  agg: Aggregation;
  lagMs: number;
  /** Events routed here and not yet applied, in arrival order from `next`. */
  queue: WireEvent[];
  next: number;
  upTo: number;
}

/**
 * Events in arrival order; every 500 ms of arrival time each shard applies what reached it (its lag earlier) and
 * seals a batch of signals; a clock tick every 5 s. Once-marks are taken from a set (KV in the role). Feed events
 * with `push`, then `finish`.
 */
export class DetectionRun {
  readonly raised: Raised[] = [];
  readonly resolved: Raised[] = [];
  private readonly defaults = loadThresholds();
  private readonly shards: Shard[];
  detection: Detection;
  private readonly marks = new Set<string>();
  private next = -1;
  private tick = -1;
  private restarted = false;
  events = 0;
  /** The most sessions the aggregator's shards held at once. */
  peakSessions = 0;

  constructor(private readonly options: DetectOptions = {}) {
    const n = options.shards ?? 1;
    if (!Number.isInteger(n) || n < 1) throw new Error(`shards must be a positive integer, got ${n}`);
    if (options.lagMs && options.lagMs.length !== n) throw new Error(`lagMs needs one lag per shard (${n})`);
    // Idle sessions leave memory as in a running shard: a large audience's day of them would not fit.
    const retain = loadConfig().aggregate_session_retain_ms;
    this.shards = Array.from({ length: n }, (_, i) => ({
      agg: new Aggregation(pipelines, retain),
      lagMs: options.lagMs?.[i] ?? 0,
      queue: [],
      next: 0,
      upTo: 0,
    }));
    this.detection = this.make();
  }

  private make(): Detection {
    return new Detection({ detectors, thresholds: (_t, c) => effective(this.defaults, this.options.overrides, c) });
  }

  push(e: WireEvent): void {
    if (this.next < 0) this.next = this.tick = e.received_at + 500;
    this.advance(e.received_at);
    const n = this.shards.length;
    const shard = this.shards[n === 1 ? 0 : shardOf(e.tenant, partitionKey(e), n)]!;
    if (shard.lagMs === 0 && shard.next === shard.queue.length) this.applyTo(shard, e);
    else shard.queue.push(e);
    this.events++;
  }

  private applyTo(shard: Shard, e: WireEvent): void {
    shard.agg.apply(e);
    // As a shard after each input, at the version its next output will have.
    shard.agg.evictIdle(shard.upTo + 1);
  }

  /** Seal and tick up to arrival time `until` (after the last event, and the most lagging shard, by default). */
  finish(until?: number): void {
    if (this.next < 0) return;
    let last = 0;
    for (const s of this.shards) {
      last = Math.max(last, s.agg.watermark + s.lagMs);
      if (s.next < s.queue.length) last = Math.max(last, s.queue[s.queue.length - 1]!.received_at + s.lagMs);
    }
    this.advance(until ?? last + 1000);
  }

  private record(changes: readonly AlertChange[], at: number): void {
    for (const c of changes)
      (c.raised ? this.raised : this.resolved).push({ category: c.row.category, tenant: c.row.tenant, at, row: c.row });
  }

  private seal(i: number, at: number): void {
    const shard = this.shards[i]!;
    // What reached the shard its lag before `at` (a seal at `at` holds arrivals before it).
    while (shard.next < shard.queue.length && shard.queue[shard.next]!.received_at + shard.lagMs < at)
      this.applyTo(shard, shard.queue[shard.next++]!);
    if (shard.next > 4096 && shard.next * 2 > shard.queue.length) {
      shard.queue = shard.queue.slice(shard.next);
      shard.next = 0;
    }
    const o = shard.agg.drain(++shard.upTo);
    const { changes, sightings } = this.detection.apply({
      v: 1,
      shard: i,
      from: shard.upTo - 1,
      up_to: shard.upTo,
      clock: shard.agg.watermark,
      signals: o.signals.map((s) => [s.name, [...s.key], s.at, s.fields]),
    });
    this.record(changes, at);
    for (const s of sightings) {
      const mark = `${s.tenant}/${s.detector.category}/${s.detector.mark(s.key)}`;
      if (this.marks.has(mark) || !s.fresh) continue;
      this.marks.add(mark);
      const f = s.detector.finding(s.key, s.fields);
      this.raised.push({
        category: s.detector.category,
        tenant: s.tenant,
        at,
        row: {
          ...f,
          tenant: s.tenant,
          id: 0,
          category: s.detector.category,
          source: s.detector.source,
          created_at: at,
          resolved_at: null,
          version: 1,
        },
      });
    }
  }

  private advance(to: number): void {
    while (to >= this.next) {
      let sessions = 0;
      for (let i = 0; i < this.shards.length; i++) {
        sessions += this.shards[i]!.agg.sessionCount;
        this.seal(i, this.next);
      }
      this.peakSessions = Math.max(this.peakSessions, sessions);
      if (this.next >= this.tick) {
        this.record(this.detection.tick(this.next), this.next);
        this.tick += 5000;
      }
      if (this.options.restartAt !== undefined && !this.restarted && this.next >= this.options.restartAt) {
        // A new active process: the state from a checkpoint, as it would be read back.
        this.restarted = true;
        const saved = structuredClone(this.detection.save());
        this.detection = this.make();
        this.detection.load(saved);
      }
      this.next += 500;
    }
  }
}

/** Every event at once (arrival order), sealed until `until` or a second after the last. */
export function detect(events: readonly WireEvent[], options: DetectOptions & { until?: number } = {}): DetectionRun {
  const run = new DetectionRun(options);
  for (const e of events) run.push(e);
  run.finish(options.until);
  return run;
}

/** A simulated client's event as ingest would put it on the stream (its context carries region and device). */
export function wireOf(e: OracleEvent, receivedAt: number): WireEvent {
  const { tenant, ts, event_type, event_id, context, ...passed } = e;
  const w: WireEvent = {
    tenant,
    env: 'production',
    event_type,
    ts,
    client_ts: ts,
    received_at: receivedAt,
    country: context?.country ?? '',
    region: context?.region ?? '',
    device: context?.device_type ?? 'other',
    ...passed,
  };
  if (event_id !== undefined) w.event_id = event_id;
  if (context !== undefined) w.context = context;
  return w;
}
