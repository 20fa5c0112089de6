// One simulation: a fleet driven by a simulated clock, its requests sent to a running Darshak, then the ground truth
// and the accuracy report. `npm run simulate` (bench/simulate.ts) is its command line; tests call it directly.

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Fleet, type Incident } from './fleet.js';
import {
  answerPaths,
  checkAlerts,
  checkAnswers,
  groundTruth,
  truthAnswers,
  differences,
  type Alert,
  type AlertCheck,
  type AnswerCheck,
} from './report.js';
import type { Oracle, OracleEvent } from './oracle.js';
import { Sender, type SendStats } from './sender.js';

const MINUTE = 60_000;

export interface SimulationOptions {
  /** One or more ingest listeners; requests go to each in turn. */
  ingestUrls: readonly string[];
  apiUrl: string;
  apiKey: string;
  /** The tenant the key belongs to, and an account that can read its analytics (for the report). */
  tenant: string;
  email: string;
  password: string;
  viewers: number;
  durationMs: number;
  /** Simulated seconds per real second. Above 1 the match is laid in the past so that it ends now. */
  speed: number;
  seed: number;
  incidents: readonly Incident[];
  /** The first ball, when not "so that the match ends as the run does": the same events at the same times. */
  startAt?: number;
  concurrency: number;
  /** How long to wait, after the last request, for the answers to match the truth before reporting. */
  settleMs: number;
  /** Directory for truth.json, concurrency.csv and report.json; none when empty. */
  out: string;
  log?: (line: string) => void;
  /** Attempts per request before it is given up (8 when absent). */
  maxAttempts?: number;
  /** Beacons retried as batches are (a browser sends one once; the soak must know every event's fate). */
  retryBeacons?: boolean;
  /** Called once every request has its answer, before the answers are awaited (the soak stops its faults here). */
  onSent?: () => Promise<void>;
}

export interface SimulationResult {
  startAt: number;
  endAt: number;
  events: number;
  sessions: number;
  peakPlayers: number;
  send: SendStats;
  /** Simulated seconds per real second, as achieved (the cap on requests in flight may hold it back). */
  achievedSpeed: number;
  answers: AnswerCheck[];
  alerts: AlertCheck[];
  otherAlerts: Record<string, number>;
  truthPeak: { value: number; at: string };
  /** The events acknowledged to the client, and the oracle over them. */
  accepted: readonly OracleEvent[];
  oracle: Oracle;
}

export async function login(apiUrl: string, email: string, password: string): Promise<string> {
  const res = await fetch(`${apiUrl}/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (res.status !== 200 || typeof body.access_token !== 'string')
    throw new Error(`login as ${email} failed: ${res.status} ${JSON.stringify(body)}`);
  return body.access_token;
}

export async function simulate(o: SimulationOptions): Promise<SimulationResult> {
  const log = o.log ?? (() => undefined);
  const realStart = Date.now();
  const runMs = o.durationMs / o.speed;
  // The match ends as the run does (at speed 1 it is live); whole minutes, so that runs line up minute for minute.
  const startAt = o.startAt ?? Math.floor((realStart + runMs - o.durationMs) / MINUTE) * MINUTE;
  // Simulated time never passes the wall clock: events are never from the future.
  const simAt = (wall: number): number => Math.min(wall, startAt + (wall - realStart) * o.speed);
  const fleet = new Fleet({
    tenant: o.tenant,
    viewers: o.viewers,
    startAt,
    durationMs: o.durationMs,
    seed: o.seed,
    incidents: o.incidents,
  });
  const sender = new Sender({
    ingestUrls: o.ingestUrls,
    apiKey: o.apiKey,
    concurrency: o.concurrency,
    maxAttempts: o.maxAttempts ?? 8,
    retryBeacons: o.retryBeacons ?? false,
  });
  // When each simulated second was sent: how old its events were on arrival.
  const arrivals: Array<[number, number]> = [];

  let lastLog = 0;
  while (!fleet.done) {
    const now = Date.now();
    const deliveries = fleet.advance(simAt(now));
    if (now - (arrivals[arrivals.length - 1]?.[1] ?? 0) >= 1000) arrivals.push([simAt(now), now]);
    for (const d of deliveries) await sender.send(d);
    if (now - lastLog >= 10_000) {
      lastLog = now;
      log(
        `t+${Math.round((simAt(now) - startAt) / 1000)} s simulated: ${sender.stats.accepted} events accepted, ${sender.busy} requests in flight`,
      );
    }
    if (deliveries.length === 0) await new Promise((r) => setTimeout(r, 20));
  }
  await sender.drain();
  await o.onSent?.();
  const realMs = Date.now() - realStart;
  const endAt = fleet.endAt;
  log(`sent: ${sender.stats.accepted} events accepted in ${sender.stats.requests} requests; waiting for the answers`);

  const token = await login(o.apiUrl, o.email, o.password);
  const get = async (path: string): Promise<unknown> => {
    const res = await fetch(`${o.apiUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const truth = groundTruth(sender.accepted, o.tenant, startAt, endAt + MINUTE);
  // The last events reach the store within seconds: wait until the answers agree, or the settle time is up.
  const settleStart = Date.now();
  const deadline = settleStart + o.settleMs;
  const probes = ['overview', 'concurrency 1m'];
  for (;;) {
    const want = truthAnswers(truth.oracle, o.tenant, Date.now(), probes);
    const agree = (
      await Promise.all(probes.map(async (k) => differences(await get(answerPaths[k]!), want[k]).length === 0))
    ).every(Boolean);
    if (agree || Date.now() > deadline) {
      log(
        `${agree ? 'the answers agree' : 'settle time up'} after ${((Date.now() - settleStart) / 1000).toFixed(1)} s`,
      );
      break;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  const answers = await checkAnswers(get, truth.oracle, o.tenant);
  const alertsBody = (await get('/v1/analytics/alerts?limit=200')) as Alert[];
  const lagAt = (sim: number): number => {
    const hit = arrivals.find(([s]) => s >= sim);
    return hit ? hit[1] - sim : 0;
  };
  const { checks, others } = checkAlerts(alertsBody, o.incidents, startAt, simAt, lagAt);
  const peak = truth.concurrency.reduce((best, c) => (c[1] > best[1] ? c : best), [startAt, 0]);
  const result: SimulationResult = {
    startAt,
    endAt,
    events: sender.accepted.length,
    sessions: fleet.stats.sessions,
    peakPlayers: fleet.stats.peakPlayers,
    send: sender.stats,
    achievedSpeed: o.durationMs / realMs,
    answers,
    alerts: checks,
    otherAlerts: others,
    truthPeak: { value: peak[1], at: new Date(peak[0]).toISOString() },
    accepted: sender.accepted,
    oracle: truth.oracle,
  };
  if (o.out) {
    await mkdir(o.out, { recursive: true });
    await writeFile(
      join(o.out, 'truth.json'),
      JSON.stringify(
        {
          tenant: o.tenant,
          start_at: new Date(startAt).toISOString(),
          end_at: new Date(endAt).toISOString(),
          incidents: o.incidents.map((i) => ({
            ...i,
            start_at: new Date(startAt + i.start).toISOString(),
            end_at: new Date(startAt + i.start + i.length).toISOString(),
          })),
          events: sender.accepted.length,
          watch_hours: truth.oracle.overview(o.tenant, '24h', Date.now()).watch_hours,
          qos_per_minute: truth.qos,
        },
        null,
        1,
      ),
    );
    await writeFile(
      join(o.out, 'concurrency.csv'),
      `ts,concurrent\n${truth.concurrency.map(([t, n]) => `${new Date(t).toISOString()},${n}`).join('\n')}\n`,
    );
    const { accepted: _accepted, oracle: _oracle, ...report } = result;
    await writeFile(
      join(o.out, 'report.json'),
      JSON.stringify({ ...report, answers: answers.map(({ got: _got, ...a }) => a) }, null, 1),
    );
  }
  return result;
}

const fmt = (n: number): string => n.toLocaleString('en-US');

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** The report as a person reads it. */
export function formatReport(o: SimulationOptions, r: SimulationResult): string {
  const lines = [
    `Darshak simulation: ${fmt(o.viewers)} viewers at the peak, a ${duration(o.durationMs)} match at ${o.speed}x, seed ${o.seed}`,
    `match: ${new Date(r.startAt).toISOString()} to ${new Date(r.endAt).toISOString()}; ${fmt(r.sessions)} sessions, ${fmt(r.peakPlayers)} players at once at most`,
    `sent: ${fmt(r.send.sent)} events in ${fmt(r.send.requests)} requests (${fmt(r.send.beacons)} beacons); accepted ${fmt(r.send.accepted)}, rejected ${fmt(r.send.rejected)}, lost ${fmt(r.send.lost)}`,
    `retries: ${
      Object.entries(r.send.retries)
        .map(([k, v]) => `${k} x${v}`)
        .join(', ') || 'none'
    }; achieved speed ${r.achievedSpeed.toFixed(2)}x`,
    `truth: peak concurrency ${fmt(r.truthPeak.value)} at ${r.truthPeak.at}`,
    'answers (range 24h) against the truth:',
    ...r.answers.map(
      (a) =>
        `  ${a.answer.padEnd(16)} ${a.exact ? 'exact' : `DIFFERS\n${a.differences.map((d) => `      ${d}`).join('\n')}`}`,
    ),
    'alerts for the injected incidents:',
    ...(r.alerts.length === 0 ? ['  (no incidents injected)'] : []),
    ...r.alerts.map((a) =>
      a.alert
        ? `  ${a.incident}: ${a.category} after ${duration(a.delay_ms ?? 0)} ("${a.alert.title}")`
        : `  ${a.incident}: MISSED (${a.category})${a.note ? `: ${a.note}` : ''}`,
    ),
    `other alerts: ${
      Object.entries(r.otherAlerts)
        .map(([k, v]) => `${k} x${v}`)
        .join(', ') || 'none'
    }`,
  ];
  return lines.join('\n');
}
