import { pipelines } from '../../pipelines/index.js';
import type { Pipeline, TableSpec } from '../../src/metric/pipeline.js';
import type { Rows } from '../../src/aggregate/accumulator.js';
import { Aggregation } from '../../src/aggregate/runtime.js';
import type { WireEvent } from '../../src/bus/wire.js';

/** Every pipeline table by name. */
export const tables = new Map<string, TableSpec>(pipelines.flatMap((p) => p.tables).map((tb) => [tb.name, tb]));

/**
 * Sum `sum` rows by key, keep a key's `replace` row of the highest version, the last of equal ones, as ClickHouse does
 * (without its version), collect `append` rows. `specs`: the tables by name, the pipelines' unless given.
 */
export function net(flushes: Rows[], specs: ReadonlyMap<string, TableSpec> = tables): Record<string, unknown> {
  const out: Record<string, Map<string, unknown>> = {};
  const versions = new Map<string, number>();
  for (const rows of flushes) {
    for (const [name, list] of rows) {
      const spec = specs.get(name)!;
      const m = (out[name] ??= new Map());
      // A `map` table's row stands for one row per map key: the other key cells, the map key and its values.
      const expanded = spec.map
        ? list.flatMap((row) => {
            const prefix = row.slice(0, spec.key.length - 1);
            const [keys, ...values] = row.slice(spec.key.length - 1) as number[][];
            return keys!.map((k, j) => [...prefix, k, ...values.map((v) => v[j]!)]);
          })
        : list;
      for (const row of expanded) {
        const k = spec.engine === 'append' ? JSON.stringify(row) : JSON.stringify(row.slice(0, spec.key.length));
        if (spec.engine === 'sum') {
          const prev = (m.get(k) as number[] | undefined) ?? spec.values.map(() => 0);
          m.set(
            k,
            prev.map((v, i) => v + Number(row[spec.key.length + i])),
          );
        } else if (spec.engine === 'replace') {
          const version = Number(row[row.length - 1]);
          if (version < (versions.get(`${name} ${k}`) ?? -1)) continue;
          versions.set(`${name} ${k}`, version);
          m.set(k, row.slice(0, -1));
        } else m.set(k, ((m.get(k) as number | undefined) ?? 0) + 1);
      }
    }
  }
  // Float64 sums (completion) differ in their last bits with the order they were added in: compared to 12 digits, and
  // what is left of a retracted sum as 0.
  for (const [name, m] of Object.entries(out)) {
    const spec = specs.get(name)!;
    if (spec.engine !== 'sum') continue;
    for (const [k, v] of m)
      m.set(
        k,
        (v as number[]).map((x, i) =>
          spec.values[i]![1] !== 'Float64' ? x : Math.abs(x) < 1e-9 ? 0 : Number(x.toPrecision(12)),
        ),
      );
  }
  const result: Record<string, unknown> = {};
  for (const [name, m] of Object.entries(out)) {
    result[name] = [...m]
      .filter(([, v]) => !(Array.isArray(v) && specs.get(name)!.engine === 'sum' && v.every((x) => x === 0)))
      .sort();
  }
  return result;
}

const t0 = Date.UTC(2026, 10, 20, 10, 0, 0);

/** A session event of tenant acme at `ts` (Unix ms), received then; `extra` sets or overrides any field. */
export function eventAt(type: string, ts: number, extra: Partial<WireEvent> = {}): WireEvent {
  return {
    tenant: 'acme',
    env: 'production',
    event_type: type,
    ts,
    client_ts: null,
    received_at: ts,
    country: 'IN',
    region: 'Goa',
    device: 'tv',
    session_id: 's1',
    ...extra,
  };
}

/** A session event at `s` seconds after 10:00 UTC, 2026-11-20 (a whole minute). */
export const ev = (type: string, s: number, extra: Partial<WireEvent> = {}): WireEvent =>
  eventAt(type, t0 + s * 1000, extra);

export const at = (s: number): number => Math.floor((t0 + s * 1000) / 1000);

/** One pipeline's net rows for these events, applied in the given order. */
export function feed(pipeline: Pipeline, events: readonly WireEvent[]): Record<string, Array<[string, unknown]>> {
  const agg = new Aggregation([pipeline], 86_400_000);
  for (const e of events) agg.apply(e);
  return net([agg.drain(1).rows]) as Record<string, Array<[string, unknown]>>;
}
