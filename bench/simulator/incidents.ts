// Injected incidents: parsed from the command line, or one of each kind placed along the match.

import type { Incident, IncidentKind } from './fleet.js';

/** A bad command line: the usage text follows the message. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export function ms(value: string, name: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value);
  if (!m) throw new UsageError(`--${name}: expected a duration like 90s, 12m or 1h, got ${JSON.stringify(value)}`);
  return Math.round(
    Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'],
  );
}

export function positive(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${name} must be a positive number, got ${JSON.stringify(value)}`);
  return n;
}

const kinds: readonly IncidentKind[] = ['rebuffer', 'startup', 'errors', 'payments'];

export function parseIncident(spec: string): Incident {
  const m = /^([a-z]+)@([^+:]+)(?:\+([^:]+))?(?::([^/]+)(?:\/(.+))?)?$/.exec(spec);
  if (!m || !kinds.includes(m[1] as IncidentKind))
    throw new UsageError(
      `--incident ${JSON.stringify(spec)}: expected KIND@START[+LENGTH][:REGION[/POP]] with KIND one of ${kinds.join(', ')}`,
    );
  const incident: Incident = {
    kind: m[1] as IncidentKind,
    start: ms(m[2]!, 'incident'),
    length: m[3] === undefined ? 5 * 60_000 : ms(m[3], 'incident'),
  };
  if (m[4] !== undefined) incident.region = m[4];
  if (m[5] !== undefined) incident.pop = m[5];
  return incident;
}

/** One of each kind, placed where the detectors have a baseline behind them (a match of 20 minutes or more). */
export function defaultIncidents(durationMs: number): Incident[] {
  const at = (x: number): number => Math.round((durationMs * x) / 60_000) * 60_000;
  const length = (x: number, min: number): number => Math.max(min * 60_000, at(x));
  return [
    { kind: 'rebuffer', start: at(0.4), length: length(0.1, 3), region: 'Maharashtra', pop: 'bom1' },
    { kind: 'payments', start: at(0.45), length: length(0.15, 5) },
    { kind: 'startup', start: at(0.6), length: length(0.1, 3), region: 'Uttar Pradesh' },
    { kind: 'errors', start: at(0.78), length: length(0.1, 3), region: 'Maharashtra' },
  ];
}
