import t from 'tap';
import { cohortMeasure } from '../../src/contracts/alert-cohort.js';
import { thresholdsProblem, loadThresholds } from '../../src/metric/thresholds.js';
import type { WireEvent } from '../../src/bus/wire.js';
import { detect, type Raised } from '../../bench/simulator/detect.js';
import { Rng } from '../../bench/simulator/rng.js';
import { loadConfig } from '../../src/config/load.js';
import { normal, oneVersionFailing, payments, playback, type Audience, type Conditions } from '../helpers/traffic.js';

// Detection on generated traffic, through the aggregator runtime and the alerts engine exactly as the roles wire
// them (bench/simulator/detect.ts), on event time. Each problem is injected in one place of a steady audience.
// About 60 s of one core alone: with three test files at once on two cores it passed tap's default 120 s.
t.setTimeout(300_000);

const t0 = Date.UTC(2026, 10, 20, 12, 0, 0);
const minute = 60_000;
const contents = ['c1', 'c2', 'c3', 'c4'];

function audience(conditions?: Audience['conditions']): Audience {
  return {
    tenant: 'acme',
    places: { Maharashtra: ['mum1', 'mum2'], Karnataka: ['blr1'] },
    perPop: 60,
    contents,
    ...(conditions && { conditions }),
  };
}

/** Conditions that differ from normal in one place between `from` and `to` (minutes after t0). */
function injected(
  from: number,
  to: number,
  where: (region: string, pop: string) => boolean,
  change: Partial<Conditions>,
): Audience['conditions'] {
  return (ts, region, pop) =>
    ts >= t0 + from * minute && ts < t0 + to * minute && where(region, pop) ? { ...normal, ...change } : normal;
}

const of = (list: Raised[], category: string): Raised[] => list.filter((r) => r.category === category);

t.test('two hours of steady traffic with normal noise raise no alert (a title is new once)', async (t) => {
  const events = [
    ...playback(audience(), t0, t0 + 120 * minute),
    ...payments('acme', t0, t0 + 120 * minute, 20, 0.05, 4),
  ].sort((a, b) => a.received_at - b.received_at);
  const { raised } = detect(events);
  t.same(
    raised.filter((r) => r.category !== 'content.new_release_detected').map((r) => `${r.category} ${r.row.title}`),
    [],
  );
  const releases = of(raised, 'content.new_release_detected');
  t.same(releases.map((r) => r.row.data.content_id).sort(), contents, 'each title is a new release once');
  t.same(releases[0]!.row.data, {
    severity: 'info',
    content_id: releases[0]!.row.data.content_id,
    title: `Title ${releases[0]!.row.data.content_id as string}`,
    content_type: null,
  });
});

t.test(
  'a rebuffer spike in one pop is alerted within 2 minutes, once, and resolves 5 minutes after it clears',
  async (t) => {
    const spike = injected(40, 48, (_r, pop) => pop === 'mum2', { stallChance: 0.6, stallMs: 6000 });
    const { raised, resolved } = detect(playback(audience(spike), t0, t0 + 60 * minute));
    const alerts = of(raised, 'qos.rebuffer_spike');
    t.equal(alerts.length, 1, 'raised once');
    const a = alerts[0]!;
    t.ok(a.at - (t0 + 40 * minute) <= 2 * minute, `raised ${(a.at - t0 - 40 * minute) / 1000} s after the spike began`);
    t.match(a.row.data, { region: 'Maharashtra', pop: 'mum2', severity: 'critical' });
    t.ok((a.row.data.current_rate as number) >= 2 * (a.row.data.baseline_rate as number) + 0.01);
    t.ok((a.row.data.affected_sessions as number) >= 10);
    t.same(Object.keys(a.row.data).sort(), [
      'affected_sessions',
      'baseline_rate',
      'cohort',
      'current_rate',
      'pop',
      'region',
      'series',
      'severity',
    ]);
    // The rate per minute of the 20 minutes up to the alert, for its chart: quiet, then the spike.
    const series = a.row.data.series as {
      start: string;
      step_seconds: number;
      unit: string;
      values: Array<number | null>;
    };
    t.match(series, { step_seconds: 60, unit: '%' });
    t.equal(series.values.length, 20);
    t.equal(
      Date.parse(series.start),
      Math.floor(a.at / 60_000) * 60_000 - 19 * minute,
      'it ends with the minute that raised the alert',
    );
    t.ok(series.values.at(-2)! > 3 * series.values[0]!, 'the spike stands out of the minutes before it');
    const r = of(resolved, 'qos.rebuffer_spike');
    t.equal(r.length, 1, 'resolved once');
    t.ok(
      r[0]!.at >= t0 + 48 * minute + 5 * minute - minute && r[0]!.at <= t0 + 48 * minute + 7 * minute,
      'resolved about 5 minutes after the spike ended',
    );
    t.equal(r[0]!.row.id, a.row.id);
    t.same(
      raised.filter((x) => x.category.startsWith('qos.') && x.category !== 'qos.rebuffer_spike').map((x) => x.category),
      [],
      'nothing else fires',
    );
  },
);

t.test('a startup regression in one region is alerted once, within 2 minutes', async (t) => {
  const slow = injected(40, 48, (region) => region === 'Karnataka', { startupMs: 2600 });
  const { raised } = detect(playback(audience(slow), t0, t0 + 55 * minute));
  const alerts = of(raised, 'qos.startup_regression');
  t.equal(alerts.length, 1);
  const a = alerts[0]!;
  t.ok(a.at - (t0 + 40 * minute) <= 2 * minute, `raised ${(a.at - t0 - 40 * minute) / 1000} s after it began`);
  t.match(a.row.data, { region: 'Karnataka' });
  t.ok((a.row.data.current_p50_ms as number) >= 1.5 * (a.row.data.baseline_p50_ms as number));
  t.ok((a.row.data.current_p95_ms as number) >= (a.row.data.current_p50_ms as number));
  t.same(Object.keys(a.row.data).sort(), [
    'affected_sessions',
    'baseline_p50_ms',
    'cohort',
    'current_p50_ms',
    'current_p95_ms',
    'region',
    'series',
    'severity',
  ]);
});

t.test('a startup regression of one app version is named by it, with its mean startup now and before', async (t) => {
  // Two sessions in three run 5.13.0, so its slow startups move the region's median; the other version's do not move.
  const a: Audience = {
    ...audience(),
    appVersions: ['5.12.0', '5.13.0', '5.13.0'],
    conditions: (ts, region, _pop, app) =>
      region === 'Karnataka' && app === '5.13.0' && ts >= t0 + 40 * minute && ts < t0 + 48 * minute
        ? { ...normal, startupMs: 2600 }
        : normal,
  };
  const alerts = of(detect(playback(a, t0, t0 + 55 * minute)).raised, 'qos.startup_regression');
  t.equal(alerts.length, 1);
  const r = alerts[0]!;
  t.ok(r.at - (t0 + 40 * minute) <= 2 * minute, `raised ${(r.at - t0 - 40 * minute) / 1000} s after it began`);
  t.equal(r.row.title, 'Startup time regression in Karnataka, mostly app version 5.13.0');
  const c = r.row.data.cohort as Record<string, unknown>;
  t.match(c, { dimension: 'app_version', value: '5.13.0' });
  t.same(Object.keys(c).sort(), ['baseline_mean_ms', 'current_mean_ms', 'dimension', 'share', 'startups', 'value']);
  t.ok((c.share as number) >= 0.8, `it holds ${String(c.share)} of the added startup time`);
  t.ok((c.current_mean_ms as number) >= 2 * (c.baseline_mean_ms as number), JSON.stringify(c));
  t.match(r.row.description, /app version 5\.13\.0/);
  t.same(
    cohortMeasure(c),
    { now: c.current_mean_ms, before: c.baseline_mean_ms, unit: ' ms', what: 'mean startup' },
    'Slack and the dashboard read its mean startup',
  );
});

t.test('an error spike in one region is alerted within 2 minutes, once, with its top error code', async (t) => {
  const failing = injected(40, 48, (region) => region === 'Maharashtra', { fatalChance: 0.4 });
  const { raised } = detect(playback(audience(failing), t0, t0 + 55 * minute));
  const alerts = of(raised, 'qos.error_spike');
  t.equal(alerts.length, 1);
  const a = alerts[0]!;
  t.ok(a.at - (t0 + 40 * minute) <= 2 * minute, `raised ${(a.at - t0 - 40 * minute) / 1000} s after the spike began`);
  t.match(a.row.data, { region: 'Maharashtra', top_error_code: 'MEDIA_ERR_DECODE' });
  t.same(Object.keys(a.row.data).sort(), [
    'affected_sessions',
    'baseline_rate',
    'cohort',
    'current_rate',
    'region',
    'series',
    'severity',
    'top_error_code',
  ]);
  t.equal(a.row.data.cohort, null, 'the whole region failed alike: no cohort is named');
  t.match(a.row.description, /No single cohort stands out/);
});

t.test(
  'an incident in one cohort of a region is named by it: the app version whose sessions fail or stall',
  async (t) => {
    const versions = ['5.12.0', '5.12.1', '5.13.0'];
    const where =
      (from: number, to: number, region: string, change: Partial<Conditions>): Audience['conditions'] =>
      (ts, r, _pop, app) =>
        ts >= t0 + from * minute && ts < t0 + to * minute && r === region && app === '5.13.0'
          ? { ...normal, ...change }
          : normal;
    const errors = detect(
      playback(
        { ...audience(where(40, 48, 'Maharashtra', { fatalChance: 0.6 })), appVersions: versions },
        t0,
        t0 + 55 * minute,
      ),
    );
    const e = of(errors.raised, 'qos.error_spike');
    t.equal(e.length, 1);
    t.match(e[0]!.row.data.cohort, { dimension: 'app_version', value: '5.13.0' });
    const cohort = e[0]!.row.data.cohort as { share: number; current_rate: number; baseline_rate: number };
    t.ok(cohort.share >= 0.8, `it holds ${cohort.share} of the failed sessions`);
    t.ok(cohort.current_rate > 5 * cohort.baseline_rate);
    t.same(
      cohortMeasure(cohort),
      { now: cohort.current_rate, before: cohort.baseline_rate, unit: ' %', what: '' },
      'Slack and the dashboard read its rates',
    );
    // In a quiet region the region's 2-minute window holds first (the same errors, tested at 10⁻⁶ where a cohort's are
    // at 10⁻⁷), and its alert names the cohort; a cohort alone in a noisy region: pipelines/qos/qos.test.ts.
    t.equal(e[0]!.row.title, 'Playback error spike in Maharashtra, mostly app version 5.13.0');
    t.match(e[0]!.row.description, /app version 5\.13\.0 holds 100 % of the failed sessions/);

    const stalls = detect(
      playback(
        { ...audience(where(40, 48, 'Maharashtra', { stallChance: 0.9, stallMs: 8000 })), appVersions: versions },
        t0,
        t0 + 55 * minute,
      ),
    );
    const r = of(stalls.raised, 'qos.rebuffer_spike');
    t.ok(r.length >= 1, 'both pops of the region stall');
    for (const a of r)
      t.match(
        a.row.data.cohort,
        { dimension: 'app_version', value: '5.13.0' },
        `${String(a.row.data.pop)} names the version`,
      );
  },
);

t.test('shards that report apart name the same cause as one aggregator: an alert waits for their parts', async (t) => {
  // The dashboard's scenario as the service meets it: 45 minutes of one region sent at once, so every event arrives
  // within a second, and the service's shards each apply their part at their own pace. A shard ahead of the others
  // can cross the region's threshold on its part alone, too few sessions of the failing version to name it.
  const now = t0 + 45 * minute;
  const sent = playback(oneVersionFailing('cause', now), t0, now).map((e, i) => ({
    ...e,
    received_at: now + 1000 + Math.floor(i / 500) * 20,
  }));
  const span = sent[sent.length - 1]!.received_at - sent[0]!.received_at;
  const shards = loadConfig().shards;
  t.ok(shards > 1, `the service runs ${shards} shards`);
  const rng = new Rng(11);
  const titles = new Map<string, number>();
  for (let trial = 0; trial < 40; trial++) {
    const lagMs = Array.from({ length: shards }, () => rng.int(0, span));
    for (const r of of(detect(sent, { shards, lagMs }).raised, 'qos.error_spike'))
      titles.set(r.row.title, (titles.get(r.row.title) ?? 0) + 1);
  }
  t.same(Object.fromEntries(titles), { 'Playback error spike in Maharashtra, mostly app version 5.13.0': 40 });
});

t.test(
  "a cohort's own spike under its pop's floor is alerted by the cohort; a near miss in a cohort is not",
  async (t) => {
    // Five app versions, a fifth of the sessions each; one stalls ten times as often in one pop: the pop's rebuffer rate
    // stays under baseline + 2 points.
    const versions = ['5.10.0', '5.11.0', '5.12.0', '5.12.1', '5.13.0'];
    const inCohort = (stallChance: number): Audience => ({
      tenant: 'acme',
      places: { Maharashtra: ['mum1'] },
      perPop: 150,
      contents,
      appVersions: versions,
      conditions: (ts, _region, _pop, app) =>
        ts >= t0 + 40 * minute && ts < t0 + 50 * minute && app === '5.13.0' ? { ...normal, stallChance } : normal,
    });
    const spike = of(detect(playback(inCohort(0.3), t0, t0 + 56 * minute)).raised, 'qos.rebuffer_spike');
    t.equal(spike.length, 1, 'raised once');
    const a = spike[0]!;
    t.ok(a.at - (t0 + 40 * minute) <= 2 * minute, `raised ${(a.at - t0 - 40 * minute) / 1000} s after the spike began`);
    t.equal(a.row.title, 'Rebuffering spike in Maharashtra / mum1 for app version 5.13.0');
    const rates = (a.row.data.series as { values: Array<number | null> }).values.slice(-3).map(Number);
    t.ok(
      Math.max(...rates) < (a.row.data.baseline_rate as number) + 2,
      `the pop's rate (${rates.join(', ')} %) stayed under its floor`,
    );
    t.match(a.row.data.cohort, { dimension: 'app_version', value: '5.13.0' });
    const c = a.row.data.cohort as { current_rate: number; baseline_rate: number; share: number };
    t.ok(
      c.current_rate >= 2 * c.baseline_rate && c.share > 0.5,
      `the version stalled in ${c.current_rate} of 100 session-minutes against ${c.baseline_rate}, ${c.share} of the stalls`,
    );
    t.match(a.row.description, /^Sessions of app version 5\.13\.0 stalled in [\d.]+ of every 100 session-minutes/);

    const nearMiss = detect(playback(inCohort(0.045), t0, t0 + 56 * minute)).raised.filter((r) =>
      r.category.startsWith('qos.'),
    );
    t.same(
      nearMiss.map((r) => r.row.title),
      [],
      'one and a half times its rate raises nothing',
    );
  },
);

t.test('events more than 10 minutes old on arrival feed baselines but raise nothing', async (t) => {
  const spike = injected(40, 48, (_r, pop) => pop === 'mum2', { stallChance: 0.6, stallMs: 6000 });
  const late = (e: WireEvent): WireEvent => (e.ts >= t0 + 38 * minute ? { ...e, received_at: e.ts + 11 * minute } : e);
  const events = playback(audience(spike), t0, t0 + 50 * minute)
    .map(late)
    .sort((a, b) => a.received_at - b.received_at);
  const { raised } = detect(events);
  t.same(of(raised, 'qos.rebuffer_spike'), []);
});

t.test('a restart from a checkpoint in the middle of an incident does not raise it again', async (t) => {
  const spike = injected(40, 50, (_r, pop) => pop === 'mum2', { stallChance: 0.6, stallMs: 6000 });
  const { raised, resolved } = detect(playback(audience(spike), t0, t0 + 60 * minute), { restartAt: t0 + 45 * minute });
  t.equal(of(raised, 'qos.rebuffer_spike').length, 1);
  t.equal(of(resolved, 'qos.rebuffer_spike').length, 1, 'and the restarted engine resolves it');
});

t.test('payment failures and a churn spike fire once each', async (t) => {
  const steady = payments('acme', t0, t0 + 30 * minute, 20, 0.05, 0);
  const failing = payments('acme', t0 + 30 * minute, t0 + 45 * minute, 20, 0.5, 0, 3);
  const { raised } = detect([...steady, ...failing].sort((a, b) => a.received_at - b.received_at));
  const pay = of(raised, 'billing.payment_failure');
  t.equal(pay.length, 1);
  // The 15-minute window passes 20 % once about 5 minutes of 50 % failures are in it.
  t.ok(
    pay[0]!.at - (t0 + 30 * minute) <= 6 * minute,
    `raised ${(pay[0]!.at - t0 - 30 * minute) / 1000} s after failures rose`,
  );
  t.same(Object.keys(pay[0]!.row.data).sort(), ['failed_payments', 'failure_rate', 'severity', 'window_minutes']);
  t.equal(pay[0]!.row.data.window_minutes, 5, 'the short window had the sample');

  // Eight days at about 4 cancellations an hour, then 30 in one hour.
  const day = 24 * 60 * minute;
  const history = payments('acme', t0 - 8 * day, t0, 0, 0, 4, 5);
  const burst: WireEvent[] = Array.from({ length: 30 }, (_, i) => {
    const ts = t0 + 10 * minute + i * 60_000;
    return {
      tenant: 'acme',
      env: 'production',
      event_type: 'subscription_cancelled',
      ts,
      client_ts: null,
      received_at: ts + 200,
      country: 'IN',
      region: '',
      device: '',
      user_id: `x${i}`,
    };
  });
  const churn = detect([...history, ...burst]);
  const c = of(churn.raised, 'billing.churn_spike');
  t.equal(c.length, 1, 'the burst, and no hour of the steady week');
  t.match(c[0]!.row.data, { window_minutes: 60 });
  t.ok((c[0]!.row.data.cancellations as number) >= 10);
  t.ok((c[0]!.row.data.baseline as number) < 10);
});

t.test('a completion drop on one title fires once', async (t) => {
  const dropping: Audience['conditions'] = (ts) =>
    ts >= t0 + 80 * minute ? { ...normal, endChance: 0.02, abandonAt: 0.1 } : normal;
  // The drop affects every pop, but only the sessions of one title: keep that by giving c4 its own audience.
  const rest = playback({ ...audience(), contents: ['c1', 'c2', 'c3'] }, t0, t0 + 130 * minute);
  const c4 = playback(
    { tenant: 'acme', places: { Delhi: ['del1'] }, perPop: 40, contents: ['c4'], conditions: dropping, seed: 9 },
    t0,
    t0 + 130 * minute,
  );
  const { raised, resolved } = detect([...rest, ...c4].sort((a, b) => a.received_at - b.received_at));
  const drops = of(raised, 'content.completion_drop');
  // The drop runs on past the turn of the hour (at 120 minutes), whose first sessions are too few to judge alone.
  t.equal(drops.length, 1, 'raised once');
  t.equal(of(resolved, 'content.completion_drop').length, 0, 'not resolved at the turn of the hour');
  t.match(drops[0]!.row.data, { content_id: 'c4', title: 'Title c4', cohort: null });
  t.ok((drops[0]!.row.data.current_pct as number) <= (drops[0]!.row.data.baseline_pct as number) - 20);
  t.match(drops[0]!.row.title, /^Completion drop: Title c4$/);
  t.match(drops[0]!.row.description, /No single cohort stands out/);

  // The same title watched in two regions, its sessions cut short in one by an error spike there: named.
  const inKerala: Audience['conditions'] = (ts, region) =>
    region === 'Kerala' && ts >= t0 + 80 * minute ? { ...normal, fatalChance: 0.8 } : normal;
  const both = playback(
    {
      tenant: 'acme',
      places: { Delhi: ['del1'], Kerala: ['cok1'] },
      perPop: 40,
      contents: ['c4'],
      conditions: inKerala,
      seed: 9,
    },
    t0,
    t0 + 130 * minute,
  );
  const regional = of(
    detect([...rest, ...both].sort((a, b) => a.received_at - b.received_at)).raised,
    'content.completion_drop',
  );
  t.equal(regional.length, 1);
  const cohort = regional[0]!.row.data.cohort as Record<string, number | string>;
  t.match(cohort, { dimension: 'region', value: 'Kerala' });
  t.ok(
    (cohort.share as number) > 0.5 && (cohort.current_pct as number) < (cohort.baseline_pct as number) - 20,
    JSON.stringify(cohort),
  );
  t.ok((cohort.sessions as number) > 50);
  t.same(
    cohortMeasure(cohort),
    { now: cohort.current_pct, before: cohort.baseline_pct, unit: ' %', what: 'completion' },
    'Slack and the dashboard read its completion',
  );
  t.match(regional[0]!.row.title, /^Completion drop: Title c4, mostly region Kerala$/);
  t.match(regional[0]!.row.description, /region Kerala holds \d+ % of the drop/);
});

t.test('a tenant override changes its threshold', async (t) => {
  // A mild spike (about 1 % against 0.4 %) fires only when the tenant asks for a ratio of 1.5 and half a point.
  const mild = injected(40, 48, (_r, pop) => pop === 'mum2', { stallChance: 0.08, stallMs: 2000 });
  const events = playback(audience(mild), t0, t0 + 50 * minute);
  t.same(of(detect(events).raised, 'qos.rebuffer_spike').length, 0);
  const relaxed = of(
    detect(events, { overrides: { 'qos.rebuffer_spike': { ratio: 1.5, min_points: 0.5 } } }).raised,
    'qos.rebuffer_spike',
  );
  t.equal(relaxed.filter((a) => a.row.data.pop === 'mum2').length, 1);
});

t.test('thresholds are checked: unknown categories and names, bad values and windows that do not fit', async (t) => {
  const defaults = loadThresholds();
  t.equal(thresholdsProblem(defaults, true), null);
  t.match(thresholdsProblem({ 'qos.nope': {} }, false), /unknown category "qos.nope"/);
  t.match(thresholdsProblem({ 'qos.rebuffer_spike': { ratioo: 2 } }, false), /has no threshold "ratioo"/);
  for (const inherited of ['toString', 'constructor', 'hasOwnProperty', '__proto__', 'valueOf']) {
    t.match(
      thresholdsProblem(JSON.parse(`{"qos.rebuffer_spike":{"${inherited}":2}}`), false),
      /has no threshold/,
      `${inherited}: an Object property is no threshold`,
    );
  }
  t.match(thresholdsProblem({ 'qos.rebuffer_spike': { ratio: -1 } }, false), /must be a number, 0 or more/);
  t.match(thresholdsProblem({ 'qos.rebuffer_spike': { ratio: '2' } }, false), /must be a number/);
  t.match(
    thresholdsProblem({ 'qos.error_spike': { baseline_minutes: 90 } }, false, defaults),
    /the longest window \+ baseline_minutes \+ guard_minutes must be at most 63/,
  );
  t.match(
    thresholdsProblem({ 'qos.rebuffer_spike': { baseline_minutes: 90 } }, false, defaults),
    /the longest window \+ baseline_minutes must be at most 63/,
    'a detector without a guard does not name one',
  );
  t.match(thresholdsProblem({ 'qos.rebuffer_spike': { ratio: 2 } }, true), /is missing/);
  t.match(thresholdsProblem([], false), /must be an object/);
  t.match(
    thresholdsProblem({ 'billing.payment_failure': { max_window_minutes: 2.5 } }, false, defaults),
    /max_window_minutes must be a whole number/,
  );
  t.match(
    thresholdsProblem({ 'qos.startup_regression': { max_window_minutes: 40 } }, false, defaults),
    /the longest window \+ baseline_minutes \+ guard_minutes must be at most 63/,
  );
  t.match(thresholdsProblem({ 'qos.startup_regression': { drift: 0 } }, false, defaults), /drift must be above 0/);
  t.equal(thresholdsProblem({ 'qos.startup_regression': { drift: 0.1 } }, false, defaults), null);
  t.match(
    thresholdsProblem({ 'qos.error_spike': { guard_minutes: 0.5 } }, false, defaults),
    /guard_minutes must be a whole number, 0 or more/,
  );
  t.match(
    thresholdsProblem({ 'qos.error_spike': { guard_minutes: 29 } }, false, defaults),
    /the longest window \+ baseline_minutes \+ guard_minutes must be at most 63/,
  );
  t.equal(thresholdsProblem({ 'qos.error_spike': { guard_minutes: 1 } }, false, defaults), null);
});
