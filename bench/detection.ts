// npm run bench:detection -- [options]: a simulated day through the aggregation runtime and the alerts engine in
// process, on event time (issue 32, docs/alerts.md). A steady day: every alert is a false one. An incident day: each
// incident's first alert of its kind and scope, and its delay; every other alert is false.

import { parseArgs } from 'node:util';
import { DetectionRun, wireOf } from './simulator/detect.js';
import { dayAudience, dayShapes, incidentDay, steadyDay, type DayShape } from './simulator/day.js';
import { Fleet, type Incident, type IncidentKind } from './simulator/fleet.js';
import type { OracleEvent } from './simulator/oracle.js';
import { positive, UsageError } from './simulator/incidents.js';
import { effective, loadThresholds, thresholdsProblem, type Thresholds } from '../src/metric/thresholds.js';

const usage = `usage: npm run bench:detection -- [--day steady|incidents] [--shape weekday|match] [--viewers 2000] [--hours 24] [--from 0] [--seed 1]
       [--noise 0.15] [--blips 2] [--per-kind 20] [--near-misses 10]
       [--thresholds '{"qos.error_spike":{"max_chance":1e-5}}'] [--shards 1] [--lag-ms 0]
--shape: the audience's day, a weekday's or a weekend's double-header of matches (15:00-19:00 and 19:00-23:00 IST);
--viewers: concurrent viewers at the evening peak; --from: the IST hour the run starts at, in the same day's world
(a span of a large audience's day, e.g. --from 18 --hours 4 for its evening peak); --noise: minute-to-minute drift of each region's levels;
--blips: short sub-threshold rises per simulated hour; --per-kind / --near-misses: incidents of each kind on the
incident day, and near misses (under the thresholds) of each; --thresholds: a tenant's overrides of config/alerts.json
(as PUT /v1/alert-thresholds takes them), to measure what they would raise; --shards: aggregator shards, events
routed as ingest routes them, shard i applying its events i × lag-ms / (shards − 1) behind arrival (--lag-ms: the
most lagging shard's lag), as a cluster whose shards report apart.
A 200,000 audience's sessions outgrow Node's default heap of about 4 GB by 21:00 IST: the npm script allows 16 GB.`;

const categoryOf: Record<IncidentKind, string> = {
  rebuffer: 'qos.rebuffer_spike',
  startup: 'qos.startup_regression',
  errors: 'qos.error_spike',
  payments: 'billing.payment_failure',
};
/** A title's first playback is news once, whatever the day: neither true nor false. */
const newRelease = 'content.new_release_detected';
const completionDrop = 'content.completion_drop';
/** An arrival time (ms) as the report shows it: the clock in IST. */
const istClock = (ms: number): string => `${new Date(ms + 5.5 * 3_600_000).toISOString().slice(11, 19)} IST`;
/** How soon each kind must be alerted (issue 32): QoS within 2 minutes, payment failures within 5. */
const dueMs: Record<IncidentKind, number> = { rebuffer: 120_000, startup: 120_000, errors: 120_000, payments: 300_000 };

/** The counted cohort an incident hits, as a suffix of its scope's key ('' for none, or one not counted). */
const cohortKey = (i: Incident): string =>
  i.cohort && i.cohort.dimension !== 'player' && i.cohort.dimension !== 'content'
    ? `/${i.cohort.dimension}=${i.cohort.value}`
    : '';

/** Per minute: play_starts per region, heartbeats per region and pop (six a minute per playing session). */
class Samples {
  private readonly starts = new Map<string, number>();
  private readonly beats = new Map<string, number>();
  private readonly payments = new Map<number, number>();

  /** `dueStarts`: a startup regression's `min_starts`, as the run's thresholds set it. */
  constructor(private readonly dueStarts: number) {}

  count(e: OracleEvent): void {
    if (e.event_type === 'payment_failed' || e.event_type === 'payment_succeeded') {
      const minute = Math.floor(e.ts / 60_000);
      this.payments.set(minute, (this.payments.get(minute) ?? 0) + 1);
      return;
    }
    const c = e.context;
    if (c?.region === undefined) return;
    const minute = Math.floor(e.ts / 60_000);
    // The scope's count, and each injectable cohort's (the simulator's incidents hit a device type or an app version).
    const scopes =
      e.event_type === 'play_start'
        ? `${c.region}/${minute}`
        : e.event_type === 'heartbeat'
          ? `${c.region}/${c.pop ?? ''}/${minute}`
          : undefined;
    if (scopes === undefined) return;
    const counts = e.event_type === 'play_start' ? this.starts : this.beats;
    for (const k of [scopes, `${scopes}/device=${c.device_type ?? ''}`, `${scopes}/app_version=${c.app_version ?? ''}`])
      counts.set(k, (counts.get(k) ?? 0) + 1);
  }

  /**
   * Whether the incident's scope had the sample its detector needs, at the least, to find it (`recall`): 25 sessions
   * a minute in the pop (rebuffering), 25 starts in the first 5 minutes (startup, errors), 10 failures expected in 5
   * minutes, or in 15 as 20 % of their payments (payments); or to find it within its due time (`due`): the same
   * sessions a minute over the first 2 minutes, `dueStarts` starts in them (startup: the 2-minute window's
   * `min_starts`), 10 (errors, 25 in 5 pro rata), 10 failures expected in 5 minutes (payments).
   * An incident of one cohort is judged by the cohort's own condition: 25 of its sessions in two minutes in the pop,
   * or its starts in the region.
   */
  enough(i: Incident, at: number, within: 'recall' | 'due'): boolean {
    const first = Math.floor(at / 60_000);
    const due = within === 'due';
    if (i.kind === 'payments') {
      // 10 failures in the first 5 minutes, or over the first 15 minutes as a fifth of their payments (an incident
      // shorter than the window fails only its own minutes' payments).
      const failing = (minutes: number): [failed: number, all: number] => {
        let failed = 0;
        let all = 0;
        for (let m = first; m < first + minutes; m++) {
          const n = this.payments.get(m) ?? 0;
          all += n;
          if (m < first + i.length / 60_000) failed += n * (i.magnitude ?? 0.7);
        }
        return [failed, all];
      };
      const [short] = failing(5);
      if (due) return short >= 10;
      const [failed, all] = failing(15);
      return short >= 10 || (failed >= 10 && failed >= 0.2 * all);
    }
    const cohort = cohortKey(i);
    const minutes = due ? 2 : 5;
    if (i.kind === 'rebuffer') {
      let beats = 0;
      for (let m = first; m < first + minutes; m++) beats += this.beats.get(`${i.region}/${i.pop}/${m}${cohort}`) ?? 0;
      return beats / 6 / minutes >= (cohort ? 12.5 : 25);
    }
    return this.startsIn(i, at, minutes) >= (!due ? 25 : i.kind === 'startup' ? this.dueStarts : 10);
  }

  /** The play_starts of the incident's region (or cohort in it) in its first minutes. */
  startsIn(i: Incident, at: number, minutes: number): number {
    const first = Math.floor(at / 60_000);
    const cohort = cohortKey(i);
    let starts = 0;
    for (let m = first; m < first + minutes; m++) starts += this.starts.get(`${i.region}/${m}${cohort}`) ?? 0;
    return starts;
  }
}

/** How the detected incidents' alerts named their cause. */
function causes(
  scored: Array<{ incident: Incident; cohort: { dimension: string; value: string } | null | undefined }>,
): Record<string, number> {
  const detected = scored.filter((s) => s.cohort !== undefined);
  const inCohort = detected.filter((s) => s.incident.cohort);
  const wide = detected.filter((s) => !s.incident.cohort);
  const same = (s: (typeof scored)[number]): boolean =>
    s.cohort?.dimension === s.incident.cohort?.dimension && s.cohort?.value === s.incident.cohort?.value;
  return {
    cohort_incidents_detected: inCohort.length,
    cohort_named_right: inCohort.filter(same).length,
    cohort_named_wrong: inCohort.filter((s) => s.cohort && !same(s)).length,
    region_wide_detected: wide.length,
    region_wide_named_a_cohort: wide.filter((s) => s.cohort).length,
  };
}

const quantile = (xs: number[], q: number): number | null => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** How long after its last event a client's batch arrives (ms). */
const latencyMs = 300;

/** `--thresholds`: overrides checked as a tenant's are, so that a figure is never of thresholds the service refuses. */
function thresholdsOf(text: string, defaults: Thresholds): Thresholds {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`--thresholds must be JSON, got ${JSON.stringify(text.slice(0, 80))}`);
  }
  const problem = thresholdsProblem(value, false, defaults);
  if (problem) throw new UsageError(`--thresholds: ${problem}`);
  return value as Thresholds;
}

function main(): void {
  const { values } = parseArgs({
    options: {
      day: { type: 'string', default: 'steady' },
      shape: { type: 'string', default: 'weekday' },
      'per-kind': { type: 'string', default: '20' },
      'near-misses': { type: 'string', default: '10' },
      viewers: { type: 'string', default: '2000' },
      hours: { type: 'string', default: '24' },
      from: { type: 'string', default: '0' },
      seed: { type: 'string', default: '1' },
      noise: { type: 'string', default: '0.15' },
      blips: { type: 'string', default: '2' },
      thresholds: { type: 'string' },
      shards: { type: 'string', default: '1' },
      'lag-ms': { type: 'string', default: '0' },
    },
    strict: true,
  });
  const viewers = positive(values.viewers, 'viewers');
  const hours = positive(values.hours, 'hours');
  const fromHour = Number(values.from);
  if (!(fromHour >= 0 && fromHour + hours <= 24))
    throw new UsageError(`--from must be an hour from 0 that leaves --hours within the day, got ${values.from}`);
  const fromMs = fromHour * 3_600_000;
  const seed = positive(values.seed, 'seed');
  const noise = Number(values.noise);
  const blips = Number(values.blips);
  if (!(noise >= 0) || !(blips >= 0)) throw new UsageError('--noise and --blips must be numbers, 0 or more');
  const shards = Number(values.shards);
  const maxLag = Number(values['lag-ms']);
  if (!(Number.isInteger(shards) && shards >= 1))
    throw new UsageError(`--shards must be 1 or more, got ${values.shards}`);
  if (!(maxLag >= 0)) throw new UsageError(`--lag-ms must be a number of ms, 0 or more, got ${values['lag-ms']}`);
  const lagMs = Array.from({ length: shards }, (_, i) => (shards === 1 ? 0 : Math.round((i * maxLag) / (shards - 1))));
  const defaults = loadThresholds();
  const overrides = values.thresholds === undefined ? undefined : thresholdsOf(values.thresholds, defaults);
  if (values.day !== 'steady' && values.day !== 'incidents')
    throw new UsageError(`--day must be steady or incidents, got ${JSON.stringify(values.day)}`);
  if (!Object.hasOwn(dayShapes, values.shape))
    throw new UsageError(`--shape must be ${Object.keys(dayShapes).join(' or ')}, got ${JSON.stringify(values.shape)}`);
  const shape = values.shape as DayShape;
  // 00:00 IST of the simulated day, and the run's start in it. The world is the day's from midnight, so a span of it
  // has the levels and blips the whole day has there.
  const startAt = Date.UTC(2026, 10, 23, 18, 30) + fromMs;
  const durationMs = Math.round(hours * 3_600_000);
  const day = steadyDay({ seed, noise, blipsPerHour: blips, hours: fromHour + hours });
  const incidents =
    values.day === 'incidents'
      ? incidentDay({
          seed,
          hours,
          perKind: positive(values['per-kind'], 'per-kind'),
          nearMisses: Number(values['near-misses']),
        })
      : [];
  const fleet = new Fleet({
    tenant: 'acme',
    viewers,
    startAt,
    durationMs,
    seed,
    incidents,
    audience: (x) => dayAudience(fromHour + x * hours, shape),
    levels: fromMs === 0 ? day.levels : (t, region, pop, device) => day.levels(t + fromMs, region, pop, device),
    leaveAtEnd: false,
  });
  const samples = new Samples(effective(defaults, overrides, 'qos.startup_regression').min_starts ?? 0);
  const run = new DetectionRun({ ...(overrides && { overrides }), shards, lagMs });
  const began = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  let reported = startAt;
  for (let t = startAt + 10_000; !fleet.done; t += 10_000) {
    for (const d of fleet.advance(t)) {
      let last = 0;
      for (const e of d.events) last = Math.max(last, e.ts);
      for (const e of d.events) {
        samples.count(e);
        run.push(wireOf(e, last + latencyMs));
      }
    }
    if (t - reported >= 3_600_000) {
      reported = t;
      // New-release infos apart, so that a steady span stopped early still says how many alerts were false.
      const news = run.raised.filter((r) => r.category === newRelease).length;
      process.stderr.write(
        `  ${new Date(t + 5.5 * 3_600_000).toISOString().slice(11, 16)} IST: ${run.events.toLocaleString('en')} events, ${run.raised.length - news} alerts and ${news} new-release infos\n`,
      );
    }
  }
  run.finish();
  const seconds = Number(process.hrtime.bigint() - began) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const alerts = run.raised.filter((r) => r.category !== newRelease);
  // An alert is an incident's when it is of its kind and scope, raised from its start to 5 minutes after its end.
  const matched = new Set<number>();
  const scored = incidents.map((i) => {
    const from = startAt + i.start;
    const hits = alerts
      .map((r, index) => ({ r, index }))
      .filter(
        ({ r }) =>
          r.category === categoryOf[i.kind] &&
          r.at >= from &&
          r.at <= from + i.length + 5 * 60_000 &&
          (i.region === undefined || r.row.data.region === i.region) &&
          (i.pop === undefined || r.row.data.pop === i.pop),
      );
    // An alert on a near miss stays a false one.
    if (!i.nearMiss) for (const h of hits) matched.add(h.index);
    const cohort =
      hits.length > 0
        ? (hits[0]!.r.row.data.cohort as { dimension: string; value: string } | null | undefined)
        : undefined;
    return {
      incident: i,
      enough: samples.enough(i, from, 'recall'),
      dueSample: samples.enough(i, from, 'due'),
      starts2: samples.startsIn(i, from, 2),
      delay: hits.length > 0 ? hits[0]!.r.at - from : null,
      cohort,
    };
  });
  const named = (s: (typeof scored)[number]): string =>
    `${new Date(startAt + s.incident.start + 5.5 * 3_600_000).toISOString().slice(11, 16)} IST ${s.incident.region ?? 'tenant'}${s.incident.pop ? `/${s.incident.pop}` : ''}${s.incident.cohort ? ` ${s.incident.cohort.dimension}=${s.incident.cohort.value}` : ''} ×${s.incident.magnitude?.toFixed(2)}`;
  // A title's completion drop that names as its cause the region or pop of an injected incident, from its start to
  // an hour after its end (completion is judged per hour of closing), is that incident's consequence: listed, not false.
  const consequences = new Map<number, string>();
  alerts.forEach((r, index) => {
    const c = r.row.data.cohort as { dimension: string; value: string } | null | undefined;
    if (matched.has(index) || r.category !== completionDrop || !c) return;
    const cause = scored.find(
      ({ incident: i }) =>
        !i.nearMiss &&
        r.at >= startAt + i.start &&
        r.at <= startAt + i.start + i.length + 3_600_000 &&
        ((c.dimension === 'region' && c.value === i.region) || (c.dimension === 'pop' && c.value === i.pop)),
    );
    if (cause) consequences.set(index, named(cause));
  });
  const falseAlerts = alerts.filter((_, index) => !matched.has(index) && !consequences.has(index));
  const kindsReport = Object.fromEntries(
    (Object.keys(categoryOf) as IncidentKind[]).map((kind) => {
      const strong = scored.filter((s) => s.incident.kind === kind && !s.incident.nearMiss);
      const expected = strong.filter((s) => s.enough);
      const delays = expected.filter((s) => s.delay !== null).map((s) => s.delay!);
      const near = scored.filter((s) => s.incident.kind === kind && s.incident.nearMiss);
      return [
        categoryOf[kind],
        {
          incidents: strong.length,
          with_enough_sample: expected.length,
          detected: delays.length,
          recall_pct: expected.length > 0 ? Math.round((delays.length / expected.length) * 1000) / 10 : null,
          detected_without_enough_sample: strong.filter((s) => !s.enough && s.delay !== null).length,
          delay_p50_s: quantile(delays, 0.5) === null ? null : Math.round(quantile(delays, 0.5)! / 1000),
          delay_max_s: delays.length > 0 ? Math.round(Math.max(...delays) / 1000) : null,
          within_due: delays.filter((d) => d <= dueMs[kind]).length,
          // Those whose scope had the sample within the due time, and how many of them were alerted within it.
          with_sample_within_due: expected.filter((s) => s.dueSample).length,
          within_due_of_those: expected.filter((s) => s.dueSample && s.delay !== null && s.delay <= dueMs[kind]).length,
          // The cause: an incident of one cohort is named by it; a region-wide one by none.
          ...(kind === 'rebuffer' || kind === 'errors' ? causes(strong) : {}),
          near_misses: near.length,
          near_misses_alerted: near.filter((s) => s.delay !== null).length,
          missed: expected.filter((s) => s.delay === null).map(named),
          // Every detection, so that two runs of a change can be compared incident by incident.
          delays: expected.filter((s) => s.delay !== null).map((s) => `${named(s)}: ${Math.round(s.delay! / 1000)} s`),
          // Past due, with the play_starts of the first 2 minutes of its scope (the sample a startup or error window has;
          // a payment failure's scope is the tenant's payments).
          late: expected
            .filter((s) => s.delay !== null && s.delay > dueMs[kind])
            .map(
              (s) =>
                `${named(s)}: ${Math.round(s.delay! / 1000)} s${kind === 'payments' ? '' : `, ${s.starts2} starts in 2 min`}${s.dueSample ? '' : ', under the sample due'}`,
            ),
        },
      ];
    }),
  );
  const byCategory = new Map<string, number>();
  for (const r of falseAlerts) byCategory.set(r.category, (byCategory.get(r.category) ?? 0) + 1);
  const out = {
    day: values.day,
    shape,
    viewers,
    hours,
    from_hour: fromHour,
    seed,
    noise,
    blips_per_hour: blips,
    ...(overrides && { thresholds: overrides }),
    ...(shards > 1 && { shards, lag_ms: lagMs }),
    blips: day.blips.filter((b) => b.start >= fromMs).length,
    events: run.events,
    sessions: fleet.stats.sessions,
    peak_players: fleet.stats.peakPlayers,
    peak_sessions_in_memory: run.peakSessions,
    false_alerts: falseAlerts.length,
    ...(values.day === 'incidents' && {
      incidents: kindsReport,
      precision_pct:
        alerts.length > 0 ? Math.round(((alerts.length - falseAlerts.length) / alerts.length) * 1000) / 10 : null,
    }),
    by_category: Object.fromEntries(byCategory),
    consequences: [...consequences].map(([index, of]) => ({
      at: istClock(alerts[index]!.at),
      title: alerts[index]!.row.title,
      of,
    })),
    alerts: falseAlerts.map((r) => ({
      at: istClock(r.at),
      category: r.category,
      title: r.row.title,
      data: r.row.data,
    })),
    seconds: Math.round(seconds),
    cpu_us_per_event: Math.round(((cpu.user + cpu.system) / run.events) * 10) / 10,
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

try {
  main();
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`${err.message}\n\n${usage}\n`);
    process.exit(2);
  }
  throw err;
}
