// The accuracy report: every analytics answer of the API against the ground truth (the oracle over the events the
// service accepted), and each injected incident's alert with its delay from the incident's start, or a miss.

import type { Incident } from './fleet.js';
import { Oracle, resolveRange, type OracleEvent } from './oracle.js';

/** Numbers to 9 significant digits: sums and means taken in another order differ in the last bits, nothing more. */
export function settle(v: unknown): unknown {
  if (typeof v === 'number') return Number(v.toPrecision(9));
  if (Array.isArray(v)) return v.map(settle);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, settle(x)]));
  return v;
}

/** Where two answers differ, as `path: got … want …` lines (at most `max`). */
export function differences(got: unknown, want: unknown, max = 5, path = ''): string[] {
  const out: string[] = [];
  const walk = (g: unknown, w: unknown, p: string): void => {
    if (out.length >= max) return;
    if (Array.isArray(w) && Array.isArray(g)) {
      if (g.length !== w.length) out.push(`${p || '.'}: ${g.length} items, want ${w.length}`);
      for (let i = 0; i < Math.min(g.length, w.length); i++) walk(g[i], w[i], `${p}[${i}]`);
      return;
    }
    if (w && g && typeof w === 'object' && typeof g === 'object') {
      for (const k of new Set([...Object.keys(w), ...Object.keys(g)]))
        walk((g as Record<string, unknown>)[k], (w as Record<string, unknown>)[k], `${p}.${k}`);
      return;
    }
    if (JSON.stringify(settle(g)) !== JSON.stringify(settle(w)))
      out.push(`${p || '.'}: ${JSON.stringify(g)}, want ${JSON.stringify(w)}`);
  };
  walk(got, want, path);
  return out;
}

export interface AnswerCheck {
  answer: string;
  exact: boolean;
  differences: string[];
  got: unknown;
}

export type Fetch = (path: string) => Promise<unknown>;

const truths: Record<string, (oracle: Oracle, tenant: string, now: number) => unknown> = {
  overview: (o, tenant, now) => o.overview(tenant, '24h', now),
  'concurrency 1m': (o, tenant, now) => o.concurrency(tenant, '24h', 1, now),
  'concurrency 5m': (o, tenant, now) => o.concurrency(tenant, '24h', 5, now),
  'top-content': (o, tenant, now) => o.topContent(tenant, '24h', now),
  geo: (o, tenant, now) => o.geo(tenant, '24h', now),
  devices: (o, tenant, now) => o.devices(tenant, '24h', now),
  qos: (o, tenant, now) => o.qosByRegion(tenant, '24h', now),
  bitrate: (o, tenant, now) => o.bitrate(tenant, '24h', now),
};

/** The analytics answers over 24 h (the simulated match lies inside it), as the oracle computes them at `now`. */
export function truthAnswers(
  oracle: Oracle,
  tenant: string,
  now: number,
  names: readonly string[] = Object.keys(truths),
): Record<string, unknown> {
  return Object.fromEntries(names.map((n) => [n, truths[n]!(oracle, tenant, now)]));
}

export const answerPaths: Record<string, string> = {
  overview: '/v1/analytics/overview?range=24h',
  'concurrency 1m': '/v1/analytics/concurrency?range=24h&interval=1',
  'concurrency 5m': '/v1/analytics/concurrency?range=24h&interval=5',
  'top-content': '/v1/analytics/top-content?range=24h&limit=200',
  geo: '/v1/analytics/geo?range=24h&limit=200',
  devices: '/v1/analytics/devices?range=24h',
  qos: '/v1/analytics/qos?range=24h&limit=200',
  bitrate: '/v1/analytics/bitrate?range=24h&limit=200',
};

/** Wait out the last 3 s of a minute, so the API and the oracle resolve the range to the same minutes. */
export async function awayFromMinuteEdge(): Promise<number> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 3000) await new Promise((r) => setTimeout(r, left + 50));
  return Date.now();
}

/** Every answer against the truth, read within one minute so both use the same range. */
export async function checkAnswers(get: Fetch, oracle: Oracle, tenant: string): Promise<AnswerCheck[]> {
  const now = await awayFromMinuteEdge();
  const want = truthAnswers(oracle, tenant, now);
  const checks: AnswerCheck[] = [];
  for (const [answer, path] of Object.entries(answerPaths)) {
    const got = await get(path);
    const diffs = differences(got, want[answer]);
    checks.push({ answer, exact: diffs.length === 0, differences: diffs, got });
  }
  if (resolveRange('24h', now).to !== resolveRange('24h', Date.now()).to) return checkAnswers(get, oracle, tenant);
  return checks;
}

export interface Alert {
  id: number;
  category: string;
  title: string;
  created_at: string;
  data: Record<string, unknown>;
}

const categoryOf: Record<Incident['kind'], string> = {
  rebuffer: 'qos.rebuffer_spike',
  startup: 'qos.startup_regression',
  errors: 'qos.error_spike',
  payments: 'billing.payment_failure',
};

export interface AlertCheck {
  incident: string;
  category: string;
  /** Simulated time the incident started (ISO). */
  started_at: string;
  alert: { id: number; title: string; created_at: string } | null;
  /** From the incident's start to the alert, in simulated time (ms); null when missed. */
  delay_ms: number | null;
  /** Why a miss was to be expected: every event of the incident was more than 10 minutes old on arrival. */
  note?: string;
}

export function describeIncident(i: Incident): string {
  const where = i.region === undefined ? '' : ` in ${i.region}${i.pop === undefined ? '' : `/${i.pop}`}`;
  return `${i.kind}${where}, ${Math.round(i.start / 60_000)} min after the start for ${Math.round(i.length / 60_000)} min`;
}

/**
 * Each incident's first alert of its category (and place) raised from a minute before it started; `simAt` maps a
 * wall-clock time to simulated time, `lagAt` gives how old an event of a simulated time was when it arrived.
 */
export function checkAlerts(
  alerts: readonly Alert[],
  incidents: readonly Incident[],
  startAt: number,
  simAt: (wall: number) => number,
  lagAt: (sim: number) => number,
): { checks: AlertCheck[]; others: Record<string, number> } {
  const used = new Set<number>();
  const checks = incidents.map((i): AlertCheck => {
    const category = categoryOf[i.kind];
    const from = startAt + i.start;
    const match = alerts
      .filter(
        (a) =>
          a.category === category &&
          (i.region === undefined || a.data.region === i.region) &&
          (i.pop === undefined || a.data.pop === i.pop),
      )
      .filter((a) => simAt(Date.parse(a.created_at)) >= from - 60_000)
      .sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at))[0];
    if (match) used.add(match.id);
    const check: AlertCheck = {
      incident: describeIncident(i),
      category,
      started_at: new Date(from).toISOString(),
      alert: match ? { id: match.id, title: match.title, created_at: match.created_at } : null,
      delay_ms: match ? Math.max(0, simAt(Date.parse(match.created_at)) - from) : null,
    };
    if (!match && lagAt(from + i.length) > 10 * 60_000)
      check.note =
        'its events were all more than 10 minutes old on arrival (speed-up), and stale minutes raise nothing';
    return check;
  });
  const others: Record<string, number> = {};
  for (const a of alerts) if (!used.has(a.id)) others[a.category] = (others[a.category] ?? 0) + 1;
  return { checks, others };
}

/** Ground truth for the file: concurrency at every second and QoS per minute and region over the match. */
export function groundTruth(
  events: readonly OracleEvent[],
  tenant: string,
  from: number,
  to: number,
): { oracle: Oracle; concurrency: Array<[number, number]>; qos: Array<Record<string, unknown>> } {
  const oracle = new Oracle(events);
  const bySecond = oracle.concurrencyBySecond(tenant, from, to);
  const concurrency: Array<[number, number]> = [];
  for (let t = from; t < to; t += 1000) concurrency.push([t, bySecond.get(t) ?? 0]);
  const regions = [...new Set(events.map((e) => e.context?.region).filter((r): r is string => r !== undefined))].sort();
  const qos: Array<Record<string, unknown>> = [];
  for (let m = Math.floor(from / 60_000) * 60_000; m < to; m += 60_000) {
    for (const region of regions) {
      const q = oracle.qos(tenant, m, m + 60_000, { region });
      if (q.watch_sec === 0 && q.sessions_started === 0) continue;
      const pct = (p: number): number | null =>
        q.startup_ms.length === 0
          ? null
          : q.startup_ms[Math.min(q.startup_ms.length - 1, Math.floor(p * q.startup_ms.length))]!;
      qos.push({
        minute: new Date(m).toISOString(),
        region,
        watch_sec: q.watch_sec,
        rebuffer_rate: q.rebuffer_rate,
        sessions_started: q.sessions_started,
        error_rate: q.error_rate,
        startup_p50_ms: pct(0.5),
        startup_p95_ms: pct(0.95),
      });
    }
  }
  return { oracle, concurrency, qos };
}
