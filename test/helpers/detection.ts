import { pipelines } from '../../pipelines/index.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import { Detection, type AlertChange } from '../../src/alerts/engine.js';
import { detectors, effective, loadThresholds, type Thresholds } from '../../src/alerts/thresholds.js';
import type { WireEvent } from '../../src/bus/wire.js';
import type { AlertRow } from '../../src/store/alerts.js';

export interface Raised {
  category: string;
  tenant: string;
  /** The arrival clock when it was raised or resolved (ms). */
  at: number;
  row: AlertRow;
}

export interface Outcome {
  raised: Raised[];
  resolved: Raised[];
  detection: Detection;
}

/**
 * The aggregator and the alerts role's engine wired as in a running cluster (one shard), without NATS: events in
 * arrival order, a batch of signals every 500 ms of arrival time, a clock tick every 5 s. Once-marks are taken from
 * a set (KV in the role).
 */
export function detect(events: readonly WireEvent[], options: { overrides?: Thresholds; restartAt?: number; until?: number } = {}): Outcome {
  const defaults = loadThresholds();
  const make = (): Detection => new Detection({ detectors, thresholds: (_t, c) => effective(defaults, options.overrides, c) });
  const agg = new Aggregation(pipelines, 86_400_000);
  let detection = make();
  const out: Outcome = { raised: [], resolved: [], detection };
  const marks = new Set<string>();
  const record = (changes: readonly AlertChange[], at: number): void => {
    for (const c of changes) (c.raised ? out.raised : out.resolved).push({ category: c.row.category, tenant: c.row.tenant, at, row: c.row });
  };
  let upTo = 0;
  const seal = (at: number): void => {
    const o = agg.drain(++upTo);
    const { changes, sightings } = detection.apply({
      v: 1,
      shard: 0,
      from: upTo - 1,
      up_to: upTo,
      clock: agg.watermark,
      signals: o.signals.map((s) => [s.name, [...s.key], s.minute, s.fields]),
    });
    record(changes, at);
    for (const s of sightings) {
      const mark = `${s.tenant}/${s.detector.category}/${s.detector.mark(s.key)}`;
      if (marks.has(mark) || !s.fresh) continue;
      marks.add(mark);
      const f = s.detector.finding(s.key, s.fields);
      out.raised.push({ category: s.detector.category, tenant: s.tenant, at, row: { ...f, tenant: s.tenant, id: 0, category: s.detector.category, source: s.detector.source, created_at: at, resolved_at: null, version: 1 } });
    }
  };
  if (events.length === 0) return out;
  let next = events[0]!.received_at + 500;
  let tick = next;
  let restarted = false;
  const advance = (to: number): void => {
    while (to >= next) {
      seal(next);
      if (next >= tick) {
        record(detection.tick(next), next);
        tick += 5000;
      }
      if (options.restartAt !== undefined && !restarted && next >= options.restartAt) {
        // A new active process: the state from a checkpoint, as it would be read back.
        restarted = true;
        const saved = structuredClone(detection.save());
        detection = make();
        detection.load(saved);
        out.detection = detection;
      }
      next += 500;
    }
  };
  for (const e of events) {
    advance(e.received_at);
    agg.apply(e);
  }
  advance(options.until ?? events[events.length - 1]!.received_at + 1000);
  return out;
}
