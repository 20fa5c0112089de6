// A day of an Indian OTT audience for the detection benchmark: the audience over 24 hours of IST, and the ways a
// steady service still differs from place to place and minute to minute (regions, pops and devices with levels of
// their own, drifting noise, short blips), none of which is an incident.

import type { CohortDimension, Incident, IncidentKind, Levels } from './fleet.js';
import { Rng } from './rng.js';
import { devices, places } from './world.js';

/** Share of the evening peak watching at each hour of IST (a weekday): a night trough, a day plateau, prime time. */
const weekday: ReadonlyArray<readonly [number, number]> = [
  [0, 0.3],
  [2, 0.1],
  [4, 0.05],
  [6, 0.12],
  [8, 0.3],
  [10, 0.35],
  [13, 0.42],
  [16, 0.45],
  [18, 0.65],
  [20, 0.95],
  [21, 1],
  [22, 0.85],
  [23, 0.55],
  [24, 0.3],
];

/**
 * A weekend's double-header (IPL on a Sunday): a later, higher day; the afternoon match from its toss at 15:00, an
 * innings break at 17:15, the last overs to 19:00 and a third of the audience gone by 19:15; the evening match's toss
 * at 19:00 bringing them back from 19:15, its innings break at 21:15, the peak in the chase and the audience leaving
 * at 23:00. The fleet follows the curve within about 20 s, so a match's end is a wave of sessions closing and a toss
 * a wave of startups.
 */
const matchDay: ReadonlyArray<readonly [number, number]> = [
  [0, 0.3],
  [2, 0.12],
  [5, 0.05],
  [7, 0.1],
  [9, 0.3],
  [11, 0.42],
  [13, 0.5],
  [15, 0.5],
  [15.5, 0.75],
  [17.2, 0.8],
  [17.3, 0.62],
  [17.6, 0.62],
  [17.75, 0.82],
  [18.75, 0.9],
  [19, 0.9],
  [19.25, 0.6],
  [19.5, 0.7],
  [20, 0.95],
  [21.2, 0.95],
  [21.3, 0.75],
  [21.6, 0.75],
  [21.75, 0.95],
  [22.75, 1],
  [23, 1],
  [23.25, 0.45],
  [24, 0.3],
];

/** The day's shapes: `weekday` (the default) and `match`, a weekend's double-header. */
export const dayShapes = { weekday, match: matchDay } as const;
export type DayShape = keyof typeof dayShapes;

/** The audience at `hour` ∈ [0, 24) of IST, as a share of the evening peak, on a day of `shape`. */
export function dayAudience(hour: number, shape: DayShape = 'weekday'): number {
  const curve = dayShapes[shape];
  const h = ((hour % 24) + 24) % 24;
  for (let i = 1; i < curve.length; i++) {
    const [h1, y1] = curve[i]!;
    const [h0, y0] = curve[i - 1]!;
    if (h <= h1) return y0 + ((y1 - y0) * (h - h0)) / (h1 - h0);
  }
  return curve[curve.length - 1]![1];
}

/** A short rise of one region's levels that stays under the detectors' thresholds. */
export interface Blip {
  region: string;
  /** ms after the day starts. */
  start: number;
  length: number;
  factor: number;
}

export interface DayOptions {
  seed: number;
  /** How far each region's levels drift minute to minute (0.15: about ±15 %). */
  noise: number;
  /** Blips per simulated hour. */
  blipsPerHour: number;
  hours: number;
}

const unit: Levels = { stall: 1, startup: 1, fatal: 1 };

/**
 * The levels of a steady day: each region, pop and device type has its own fixed levels (a lognormal spread around
 * 1), each region's drift by an AR(1) walk sampled once per minute, and blips of 1 to 3 minutes at up to 1.6 times.
 * A function of (minute, region, pop, device), the same for every call: the fleet asks it per player per second.
 */
export function steadyDay(o: DayOptions): {
  levels: (t: number, region: string, pop: string, device: string) => Levels;
  blips: Blip[];
} {
  const rng = new Rng(o.seed);
  const spread = (sigma: number): number => Math.exp(sigma * (rng.next() + rng.next() + rng.next() - 1.5) * 2);
  const fixed = (): Levels => ({ stall: spread(0.35), startup: spread(0.15), fatal: spread(0.35) });
  const region = new Map(places.map((p) => [p.region, fixed()]));
  const pop = new Map([...new Set(places.flatMap((p) => p.pops))].map((name) => [name, fixed()]));
  const device = new Map(devices.map((d) => [d.device_type, fixed()]));
  const blips: Blip[] = [];
  for (let n = Math.round(o.blipsPerHour * o.hours); n > 0; n--) {
    blips.push({
      region: rng.pick(places).region,
      start: rng.int(0, o.hours * 60 - 4) * 60_000,
      length: rng.int(1, 3) * 60_000,
      factor: 1.2 + 0.4 * rng.next(),
    });
  }
  // Each region's drift, one value per minute: x' = 0.9 x + e, scaled so its spread is about `noise`.
  const minutes = o.hours * 60 + 1;
  const drift = new Map<string, Float32Array>();
  for (const p of places) {
    const walk = new Float32Array(minutes);
    let x = 0;
    for (let m = 0; m < minutes; m++) {
      x = 0.9 * x + 0.44 * o.noise * (rng.next() + rng.next() + rng.next() - 1.5) * 2;
      walk[m] = Math.exp(x);
    }
    drift.set(p.region, walk);
  }
  let cachedMinute = -1;
  let active: Blip[] = [];
  return {
    blips,
    levels(t, r, p, d) {
      const minute = Math.floor(t / 60_000);
      if (minute !== cachedMinute) {
        cachedMinute = minute;
        active = blips.filter((b) => t >= b.start && t < b.start + b.length);
      }
      const a = region.get(r) ?? unit;
      const b = pop.get(p) ?? unit;
      const c = device.get(d) ?? unit;
      const w = drift.get(r)?.[Math.min(minutes - 1, Math.max(0, minute))] ?? 1;
      let bump = 1;
      for (const blip of active) if (blip.region === r) bump *= blip.factor;
      return {
        stall: a.stall * b.stall * c.stall * w * bump,
        startup: a.startup * b.startup * c.startup * Math.sqrt(w),
        fatal: a.fatal * b.fatal * c.fatal * w * bump,
      };
    },
  };
}

/** An incident of the incident day, and whether it is a near miss (under the thresholds: an alert on it is false). */
export interface DayIncident extends Incident {
  nearMiss: boolean;
}

const kinds: readonly IncidentKind[] = ['rebuffer', 'startup', 'errors', 'payments'];

/** Cohorts an incident may hit: each a sixth to a third of the audience (world.ts), so that naming it means something. */
const cohorts: ReadonlyArray<{ dimension: CohortDimension; value: string }> = [
  { dimension: 'device', value: 'tv' },
  { dimension: 'app_version', value: '5.12.0' },
  { dimension: 'app_version', value: '5.12.1' },
  { dimension: 'app_version', value: '5.13.0' },
];

/**
 * `perKind` incidents of each kind and `nearMisses` near misses of each, at random times, regions (by population,
 * among the states big enough to be watched at all), cohorts and magnitudes. Incidents of one scope keep 40 minutes apart, so
 * each has a clean baseline behind it; payment failures, tenant-wide and judged against a fixed share, 20.
 */
export function incidentDay(o: { seed: number; hours: number; perKind: number; nearMisses: number }): DayIncident[] {
  const rng = new Rng(o.seed * 7919 + 1);
  // Incidents start at any second of a minute, as real ones do (a window that starts with the clock minute would
  // otherwise always catch an incident's first minute whole). Drawn apart, so the seed's incidents stay the same.
  const second = new Rng(o.seed * 7919 + 2);
  const big = places.filter((p) => p.population >= 25);
  const out: DayIncident[] = [];
  const busy = new Map<string, Array<[number, number]>>();
  const free = (scope: string, from: number, to: number): boolean => {
    const gap = (scope === 'payments' ? 20 : 40) * 60_000;
    return (busy.get(scope) ?? []).every(([a, b]) => to + gap <= a || from >= b + gap);
  };
  for (const kind of kinds) {
    for (let n = 0; n < o.perKind + o.nearMisses; n++) {
      const nearMiss = n >= o.perKind;
      for (let tries = 0; tries < 200; tries++) {
        const place = rng.weighted(big.map((p) => [p, p.population] as const));
        const start = rng.int(40, o.hours * 60 - 30) * 60_000 + second.int(0, 59_999);
        const length = rng.int(6, 20) * 60_000;
        const scope = kind === 'payments' ? 'payments' : `${kind}/${place.region}`;
        if (!free(scope, start, start + length)) continue;
        busy.set(scope, [...(busy.get(scope) ?? []), [start, start + length]]);
        const magnitude = {
          rebuffer: nearMiss ? 1.5 : 15 + 15 * rng.next(),
          startup: nearMiss ? 1.25 : 2.5 + 1.5 * rng.next(),
          errors: nearMiss ? 1.5 : 40 + 40 * rng.next(),
          payments: nearMiss ? 0.12 : 0.3 + 0.5 * rng.next(),
        }[kind];
        const incident: DayIncident = { kind, start, length, magnitude, nearMiss };
        if (kind !== 'payments') incident.region = place.region;
        if (kind === 'rebuffer') incident.pop = place.pops[0]!;
        // Every other rebuffer and error incident, and near miss, hits one cohort only, which its alert should name.
        // (A startup regression of a cohort under half the region's startups does not move the region's median: not
        // injected.)
        if ((kind === 'rebuffer' || kind === 'errors') && n % 2 === 1) incident.cohort = rng.pick(cohorts);
        out.push(incident);
        break;
      }
    }
  }
  return out.sort((a, b) => a.start - b.start);
}
