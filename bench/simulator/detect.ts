import { pipelines } from '../../pipelines/index.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import { loadConfig } from '../../src/config/load.js';
import { Detection, type AlertChange } from '../../src/alerts/engine.js';
import { detectors, effective, loadThresholds, type Thresholds } from '../../src/metric/thresholds.js';
import type { WireEvent } from '../../src/bus/wire.js';
import type { AlertRow } from '../../src/store/alerts.js';
import type { OracleEvent } from './oracle.js';

// The aggregator and the alerts role's engine wired as in a running cluster (one shard), without NATS, on event
// time: what the detection benchmark and the detection tests run, so that a simulated day takes minutes.

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
}

/**
 * Events in arrival order, a batch of signals every 500 ms of arrival time, a clock tick every 5 s. Once-marks are
 * taken from a set (KV in the role). Feed events with `push`, then `finish`.
 */
export class DetectionRun {
  readonly raised: Raised[] = [];
  readonly resolved: Raised[] = [];
  private readonly defaults = loadThresholds();
  private readonly agg: Aggregation;
  detection: Detection;
  private readonly marks = new Set<string>();
  private upTo = 0;
  private next = -1;
  private tick = -1;
  private restarted = false;
  events = 0;
  /** The most sessions the aggregator held at once. */
  peakSessions = 0;

  constructor(private readonly options: DetectOptions = {}) {
    // Idle sessions leave memory as in a running shard: a large audience's day of them would not fit.
    this.agg = new Aggregation(pipelines, loadConfig().aggregate_session_retain_ms);
    this.detection = this.make();
  }

  private make(): Detection {
    return new Detection({ detectors, thresholds: (_t, c) => effective(this.defaults, this.options.overrides, c) });
  }

  push(e: WireEvent): void {
    if (this.next < 0) this.next = this.tick = e.received_at + 500;
    this.advance(e.received_at);
    this.agg.apply(e);
    // As a shard after each input, at the version its next output will have.
    this.agg.evictIdle(this.upTo + 1);
    this.events++;
  }

  /** Seal and tick up to arrival time `until` (after the last event by default). */
  finish(until?: number): void {
    if (this.next >= 0) this.advance(until ?? this.agg.watermark + 1000);
  }

  private record(changes: readonly AlertChange[], at: number): void {
    for (const c of changes)
      (c.raised ? this.raised : this.resolved).push({ category: c.row.category, tenant: c.row.tenant, at, row: c.row });
  }

  private seal(at: number): void {
    this.peakSessions = Math.max(this.peakSessions, this.agg.sessionCount);
    const o = this.agg.drain(++this.upTo);
    const { changes, sightings } = this.detection.apply({
      v: 1,
      shard: 0,
      from: this.upTo - 1,
      up_to: this.upTo,
      clock: this.agg.watermark,
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
      this.seal(this.next);
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
