import t from 'tap';
import {
  alertIdentity,
  Detection,
  maxFields,
  maxHoldMs,
  rememberedMarks,
  resolveMs,
  shardLiveMs,
  type AlertChange,
} from '../../src/alerts/engine.js';
import {
  binomialTail,
  cohortField,
  explain,
  negBinomialTail,
  normalTail,
  windowDetector,
  type WindowDetector,
} from '../../src/metric/detector.js';
import { detectors, effective, loadThresholds } from '../../src/metric/thresholds.js';
import type { SignalMessage } from '../../src/bus/wire.js';

// The engine's bookkeeping, message by message: shards' partial counts add up, a repeated batch counts once, time
// passes by ticks alone, ids are a function of the incident, state survives save and load.

const defaults = loadThresholds();
const engine = (): Detection => new Detection({ detectors, thresholds: (_t, c) => effective(defaults, null, c) });
const t0 = Date.UTC(2026, 10, 21, 10, 0, 0);
const minute = (i: number): number => (t0 + i * 60_000) / 1000;

/** One shard's batch: payments of minute `i` (with `failed` of them failing), the clock at that minute's end. */
function payments(shard: number, upTo: number, i: number, all: number, failed: number): SignalMessage {
  return {
    v: 1,
    shard,
    from: upTo - 1,
    up_to: upTo,
    clock: t0 + (i + 1) * 60_000,
    signals: [['billing', ['acme'], minute(i), { payments: all, failed, cancellations: 0 }]],
  };
}

t.test('partial counts from shards add up: neither shard alone crosses the threshold', async (t) => {
  const d = engine();
  // 15 minutes of 20 payments, 1 failing, on each of two shards; then a minute where each shard sees 6 of 10 fail.
  let seq = 0;
  for (let i = 0; i < 15; i++)
    for (const shard of [0, 1]) t.same(d.apply(payments(shard, ++seq, i, 20, 1)).changes, []);
  t.same(d.apply(payments(0, ++seq, 15, 10, 6)).changes, [], 'one shard: 6 + 14 failures of 300 (under 20 %)');
  // Several more minutes: only with both shards does the window cross 20 % with 10 failures.
  let raised = 0;
  for (let i = 15; i < 22; i++) {
    for (const shard of [0, 1]) {
      if (i === 15 && shard === 0) continue;
      raised += d.apply(payments(shard, ++seq, i, 10, 6)).changes.filter((c) => c.raised).length;
    }
  }
  t.equal(raised, 1, 'raised once, from both shards together');
});

t.test('a batch a shard publishes again is applied once', async (t) => {
  const a = engine();
  const b = engine();
  for (let i = 0; i < 20; i++) {
    const m = payments(0, i + 1, i, 20, i >= 14 ? 12 : 1);
    a.apply(m);
    b.apply(m);
    b.apply(structuredClone(m));
  }
  t.same(b.save(), a.save());
});

t.test('ticks alone resolve an incident after 5 quiet minutes, and forget old buckets', async (t) => {
  const d = engine();
  let seq = 0;
  let raisedAt = 0;
  for (let i = 0; i < 20; i++) {
    const r = d.apply(payments(0, ++seq, i, 20, i >= 10 ? 15 : 1));
    if (r.changes.some((c) => c.raised)) raisedAt = i;
  }
  t.ok(raisedAt > 0);
  t.equal(d.openIncidents, 1);
  const last = t0 + 20 * 60_000;
  t.same(d.tick(last + resolveMs - 1000), [], 'not yet');
  const resolved = d.tick(last + resolveMs);
  t.equal(resolved.length, 1);
  t.match(resolved[0]!.row, { category: 'billing.payment_failure', version: 2, resolved_at: last + resolveMs });
  t.equal(d.openIncidents, 0);
  // The same signal feeds the churn detector, which keeps hourly buckets for a week.
  d.tick(last + 2 * 3_600_000);
  t.same(
    d.save().keys.map((k) => k[0]),
    ['billing.churn_spike'],
    'payment buckets past their hour of history are gone, and their key',
  );
  d.tick(last + 8 * 86_400_000);
  t.same(d.save().keys, [], 'and after a week, the churn buckets too');
});

t.test(
  'a churn spike that goes on past the turn of the hour is one incident, resolved after a clear hour',
  async (t) => {
    const d = engine();
    const hour = 3_600_000;
    const start = t0 - 8 * 24 * hour;
    let seq = 0;
    const changes: AlertChange[] = [];
    // `n` cancellations in hour `h` (after `start`), spread over its minutes; the clock is each minute's end.
    const cancel = (h: number, n: number): void => {
      for (let i = 0; i < n; i++) {
        const at = start + h * hour + Math.floor((i * 60) / n) * 60_000;
        changes.push(
          ...d.apply({
            v: 1,
            shard: 0,
            from: seq,
            up_to: ++seq,
            clock: at + 60_000,
            signals: [['billing', ['acme'], at / 1000, { payments: 0, failed: 0, cancellations: 1 }]],
          }).changes,
        );
      }
    };
    // Eight days of 4 an hour, then 30 in each of two hours: the second hour's first 4 minutes hold 2 (under 10).
    for (let h = 0; h < 8 * 24; h++) cancel(h, 4);
    t.same(changes, [], 'a steady week');
    cancel(8 * 24, 30);
    t.same(
      changes.map((c) => [c.row.category, c.raised]),
      [['billing.churn_spike', true]],
    );
    cancel(8 * 24 + 1, 30);
    t.equal(changes.length, 1, 'not resolved at the turn of the hour, nor raised again');
    // Then an ordinary hour: resolved once it is over (and 5 minutes passed since the last finding).
    cancel(8 * 24 + 2, 4);
    const over = start + (8 * 24 + 3) * hour;
    t.same(d.tick(over - 1000), [], 'not while the clear hour goes on');
    const resolved = d.tick(over);
    t.match(
      resolved.map((c) => c.row),
      [{ category: 'billing.churn_spike', version: 2, resolved_at: over }],
    );
  },
);

t.test(
  "a detector's cohorts are kept for their own history: a completion drop's for a day, its counts a week",
  async (t) => {
    const d = engine();
    d.apply({
      v: 1,
      shard: 0,
      from: 0,
      up_to: 1,
      clock: t0 + 60_000,
      signals: [
        ['completion', ['acme', 'c1'], minute(0), { sessions: 1, pct: 80 }],
        ['completion_cohorts', ['acme', 'c1'], minute(0), { 'n@region=Goa': 1, 'u@region=Goa': 20 }],
      ],
    });
    const kept = (): Array<[number, number]> =>
      d
        .save()
        .keys.filter((k) => k[0] === 'content.completion_drop')
        .map((k) => [k[3].length, k[6].length]);
    t.same(kept(), [[1, 1]]);
    d.tick(t0 + 25 * 3_600_000);
    t.same(kept(), [[1, 1]], 'after 25 hours, both');
    d.tick(t0 + 26 * 3_600_000);
    t.same(kept(), [[1, 0]], 'after 26, the counts alone');
    d.tick(t0 + 8 * 86_400_000);
    t.same(kept(), [], 'after a week, neither');
  },
);

t.test('alert ids are a function of the incident; a saved and loaded engine goes on identically', async (t) => {
  t.same(
    alertIdentity('acme', 'qos.rebuffer_spike', 'Goa\u0001pop1\n1795000000'),
    alertIdentity('acme', 'qos.rebuffer_spike', 'Goa\u0001pop1\n1795000000'),
  );
  t.not(alertIdentity('acme', 'qos.rebuffer_spike', 'a').id, alertIdentity('acme', 'qos.rebuffer_spike', 'b').id);
  const { id, eventId } = alertIdentity('acme', 'qos.rebuffer_spike', 'a');
  t.ok(Number.isSafeInteger(id) && id > 0);
  t.match(eventId, /^evt_[0-9a-f]{24}$/);

  const messages = Array.from({ length: 30 }, (_, i) => payments(0, i + 1, i, 20, i >= 12 && i < 18 ? 14 : 1));
  const run = (restartAt?: number): string[] => {
    let d = engine();
    const out: string[] = [];
    messages.forEach((m, i) => {
      if (i === restartAt) {
        const loaded = engine();
        loaded.load(structuredClone(d.save()));
        d = loaded;
      }
      out.push(...d.apply(m).changes.map((c) => `${c.row.id}:${c.row.version}`));
    });
    out.push(...d.tick(t0 + 40 * 60_000).map((c) => `${c.row.id}:${c.row.version}`));
    return out;
  };
  const outcomes = [run(), run(14)];
  t.ok(outcomes[0]!.length > 0);
  t.same(outcomes[1], outcomes[0], 'the same alerts, with the same ids, across the save and load');
});

t.test('replayed input older than the take-over opens incidents quietly', async (t) => {
  const d = engine();
  d.quietBefore = t0 + 60 * 60_000;
  let changes = 0;
  for (let i = 0; i < 20; i++) changes += d.apply(payments(0, i + 1, i, 20, i >= 10 ? 15 : 1)).changes.length;
  t.equal(changes, 0, 'nothing raised');
  t.equal(d.openIncidents, 1, 'but the incident is known, so it is not raised later');
  t.same(d.tick(t0 + 60 * 60_000), [], 'and its resolution stores nothing: it was never stored by this process');
});

/** One batch with a minute of every pop's playback: `rate` % of its watch time rebuffering. */
function pops(upTo: number, i: number, names: readonly string[], rate: (pop: string) => number): SignalMessage {
  return {
    v: 1,
    shard: 0,
    from: upTo - 1,
    up_to: upTo,
    clock: t0 + (i + 1) * 60_000,
    signals: names.map((pop) => [
      'qos_pop',
      ['acme', 'Goa', pop],
      minute(i),
      { sessions: 40, watch_ms: 2_400_000, rebuffer_ms: 24_000 * rate(pop), stalled: 10 },
    ]),
  };
}

t.test(
  'past the hourly cap of a category, one summary alert stands for the rest, resolved with the count when the hour ends',
  async (t) => {
    const d = new Detection({ detectors, thresholds: (_t, c) => effective(defaults, null, c), maxPerHour: 2 });
    const names = ['p1', 'p2', 'p3', 'p4', 'p5'];
    const raised = [];
    let seq = 0;
    for (let i = 0; i < 14; i++)
      raised.push(...d.apply(pops(++seq, i, names, () => (i >= 12 ? 20 : 1))).changes.filter((c) => c.raised));
    t.equal(raised.length, 3, 'two alerts and the summary');
    t.same(
      raised.filter((c) => c.row.data.summary !== true).map((c) => c.row.data.pop),
      ['p1', 'p2'],
      'the first two pops are alerted one by one',
    );
    const summary = raised.find((c) => c.row.data.summary === true)!;
    t.match(summary.row, {
      category: 'qos.rebuffer_spike',
      severity: 'warning',
      data: { max_per_hour: 2, suppressed: 1 },
      version: 1,
    });
    t.equal(d.openIncidents, 5, 'every incident is tracked');
    const resolved = d.tick(t0 + 3_600_000 + 60_000);
    const resolvedSummary = resolved.find((c) => c.row.id === summary.row.id);
    t.match(
      resolvedSummary?.row,
      { version: 2, data: { suppressed: 3 } },
      'resolved when the hour ends, with the final count',
    );
    t.equal(
      resolved.filter((c) => c.row.data.summary !== true).length,
      2,
      'only the raised incidents resolve in the store',
    );
  },
);

t.test(
  "past a tenant's key cap, new regions and pops are summed under `other`; keys that go free are counted again",
  async (t) => {
    const d = new Detection({ detectors, thresholds: (_t, c) => effective(defaults, null, c), maxKeys: 3 });
    d.apply(pops(1, 0, ['p1', 'p2', 'p3', 'p4', 'p5'], () => 1));
    const keys = d.save().keys.map((k) => k[2].join('/'));
    t.same(keys.sort(), ['Goa/p1', 'Goa/p2', 'Goa/p3', 'other/other'], 'three kept, the rest in other');
    d.tick(t0 + 3 * 3_600_000);
    t.same(d.save().keys, [], 'all expire');
    d.apply(pops(2, 180, ['p4', 'p5'], () => 1));
    t.same(
      d
        .save()
        .keys.map((k) => k[2].join('/'))
        .sort(),
      ['Goa/p4', 'Goa/p5'],
      'the cap counts the keys held now',
    );
  },
);

t.test('once-marks and labels are kept for the most recently seen ids only', async (t) => {
  const d = engine();
  const total = rememberedMarks + 10;
  const seen = (upTo: number, ids: number[]): SignalMessage => ({
    v: 1,
    shard: 0,
    from: upTo - 1,
    up_to: upTo,
    clock: t0 + 60_000,
    signals: ids.map((i) => ['content_seen', ['acme', `c${i}`, `Title ${i}`, 'movie'], minute(0), { n: 1 }]),
  });
  d.apply(
    seen(
      1,
      Array.from({ length: total }, (_, i) => i),
    ),
  );
  const saved = d.save();
  t.equal(saved.seen.length, rememberedMarks, 'bounded');
  t.equal(saved.labels.length, rememberedMarks);
  t.equal(d.apply(seen(2, [total - 1])).sightings.length, 0, 'a recent id is known');
  t.equal(
    d.apply(seen(3, [0])).sightings.length,
    1,
    'the oldest was forgotten: seen again, it goes to the cluster-wide once-mark',
  );
});

t.test('the tails that tell a spike from noise', async (t) => {
  const close = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-12 + 1e-6 * b;
  // Reference values: exact sums in rational arithmetic.
  t.equal(negBinomialTail(0, 3, 0.5), 1);
  t.ok(close(negBinomialTail(1, 1, 0.5), 0.5));
  t.ok(close(negBinomialTail(6, 2, 0.75), 0.0013427734375));
  t.ok(
    close(negBinomialTail(8, 5, 6 / 7), 4.995843160815575e-5),
    '8 errors after 4 in a baseline six times as long: 1 in 20,000, ordinary over a day of regions',
  );
  t.ok(close(negBinomialTail(15, 5, 6 / 7), 4.595946286726476e-10), '15 after the same 4: an incident');
  t.equal(negBinomialTail(3, 2, 1), 0);
  // The normal tail against its known values (erfc / 2), to the fit's 1.2e-7 relative.
  const near = (a: number, b: number): boolean => Math.abs(a - b) <= 2e-7 * b;
  t.ok(near(normalTail(0), 0.5) && near(normalTail(-1), 0.8413447460685429));
  t.ok(near(normalTail(1.959963984540054), 0.025), 'the two-sided 95 % point');
  t.ok(near(normalTail(4.753424308822899), 1e-6), 'the 10⁻⁶ the startup condition reads');
  t.ok(near(normalTail(6), 9.865876450377e-10) && near(normalTail(8), 6.22096057427e-16));
});

t.test(
  'the cohort that explains a finding: the narrowest one holding most of the excess, none when all moved alike',
  async (t) => {
    // Per cohort: [bad, exposure] in the window and in the baseline (six times as long), as metrics `bad` and `exposure`.
    const split =
      (bad: string, exposure: string) =>
      (cohorts: Record<string, [number, number]>): Record<string, number> => {
        const f: Record<string, number> = {};
        for (const [c, [b, e]] of Object.entries(cohorts)) {
          const [dim, value] = c.split('=') as [string, string];
          f[cohortField(bad, dim, value)] = b;
          f[cohortField(exposure, dim, value)] = e;
        }
        return f;
      };
    const fields = split('f', 'a');
    const base = fields({
      'device=mobile': [12, 6000],
      'device=tv': [4, 2000],
      'app_version=1': [8, 4000],
      'app_version=2': [8, 4000],
    });
    // TVs fail (a third of the exposure); every app version has its share of TVs.
    const tv = fields({
      'device=mobile': [2, 1000],
      'device=tv': [40, 333],
      'app_version=1': [21, 667],
      'app_version=2': [21, 666],
    });
    const c = explain(tv, base, 'f', 'a', 'rate')!;
    t.match(c, { dimension: 'device', value: 'tv', exposure: 333 });
    t.ok(c.share > 0.9, 'most failed sessions are TVs');
    t.ok(c.current > 10 * c.baseline);
    // Everything fails alike: no cohort stands out.
    const wide = fields({
      'device=mobile': [30, 1000],
      'device=tv': [10, 333],
      'app_version=1': [20, 667],
      'app_version=2': [20, 666],
    });
    t.equal(explain(wide, base, 'f', 'a', 'rate'), null);
    // A mean (startup ms per startup): version 2 slowed down.
    const ms = split('m', 'n');
    const slowBase = ms({
      'app_version=1': [90_000, 100],
      'app_version=2': [90_000, 100],
      'device=tv': [36_000, 40],
      'device=mobile': [144_000, 160],
    });
    const slow = ms({
      'app_version=1': [15_000, 16],
      'app_version=2': [48_000, 16],
      'device=tv': [26_000, 13],
      'device=mobile': [37_000, 19],
    });
    const v2 = explain(slow, slowBase, 'm', 'n', 'mean')!;
    t.match(v2, { dimension: 'app_version', value: '2', current: 3000, baseline: 900 });
    t.ok(v2.share > 0.95, 'nearly all the added startup time');
    t.equal(explain({}, {}, 'f', 'a', 'rate'), null, 'nothing to explain');
    // A handful of failed sessions in a partial minute, 6 of 7 in one of two titles of equal audience: a part a coin
    // gives one title often enough (P = 0.0625), not a cause. Ten times the sessions, the same parts, are one.
    const titles = (k: number): Record<string, number> =>
      fields({ 'content=a': [6 * k, 500 * k], 'content=b': [k, 500 * k] });
    const titleBase = fields({ 'content=a': [6, 3000], 'content=b': [6, 3000] });
    t.equal(explain(titles(1), titleBase, 'f', 'a', 'rate'), null, '6 of 7 names no title');
    t.match(explain(titles(10), titleBase, 'f', 'a', 'rate'), { dimension: 'content', value: 'a' }, '60 of 70 does');
  },
);

t.test('binomialTail: P(X ≥ k) of a binomial count', async (t) => {
  const near = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-9 * Math.max(b, 1e-300);
  t.ok(near(binomialTail(4, 6, 0.3), 0.07047), 'a few sessions');
  t.ok(near(binomialTail(13, 20, 1 / 3), 0.0037245689742891564));
  t.ok(near(binomialTail(130, 200, 1 / 3), 6.157686055468666e-20), 'far in the tail');
  t.equal(binomialTail(0, 5, 0.2), 1);
  t.equal(binomialTail(6, 5, 0.2), 0, 'more than n');
  t.equal(binomialTail(3, 3, 1), 1);
});

/** A detector of the signal `probe` in minute buckets, and an engine with it alone, for the engine's bookkeeping. */
function probe(category: string, running: number, evaluate: WindowDetector['evaluate']): WindowDetector {
  return windowDetector({
    kind: 'window',
    category,
    source: 'qos',
    signal: 'probe',
    bucketSeconds: 60,
    historyBuckets: 10,
    running,
    params: {},
    evaluate,
  });
}
const probing = (d: WindowDetector): Detection => new Detection({ detectors: [d], thresholds: () => ({}) });

t.test('a bucket takes at most maxFields counter names: made-up cohorts cannot grow it', async (t) => {
  const d = probing(probe('test.probe', 1, () => null));
  const many = Object.fromEntries(Array.from({ length: maxFields + 500 }, (_, i) => [`f@content=made-up-${i}`, 1]));
  d.apply({
    v: 1,
    shard: 0,
    from: 0,
    up_to: 1,
    clock: t0,
    signals: [['probe', ['acme', 'k'], t0 / 1000, { n: 1, ...many }]],
  });
  d.apply({
    v: 1,
    shard: 0,
    from: 1,
    up_to: 2,
    clock: t0,
    signals: [['probe', ['acme', 'k'], t0 / 1000, { n: 1, 'f@content=another': 1 }]],
  });
  const buckets = d.save().keys[0]![3];
  const fields = buckets[0]![1];
  t.equal(Object.keys(fields).length, maxFields);
  t.equal(fields.n, 2, 'known names still add up');
  t.notOk('f@content=another' in fields);
});

t.test(
  'a detector reads only the thresholds it declares: another name does not compile (npm run typecheck)',
  async (t) => {
    const probe = windowDetector({
      kind: 'window',
      category: 'test.typed',
      source: 'qos',
      signal: 'probe',
      bucketSeconds: 60,
      historyBuckets: 10,
      running: 1,
      params: { ratio: 'a ratio' },
      evaluate(w) {
        // @ts-expect-error a misspelt threshold would read undefined, and every comparison with it would be false
        const misspelt: number = w.thresholds.ratoi; // eslint-disable-line @typescript-eslint/no-unsafe-assignment
        return w.thresholds.ratio > 1 && misspelt > 0
          ? { severity: 'warning', title: '', description: '', data: {} }
          : null;
      },
    });
    t.same(Object.keys(probe.params), ['ratio']);
    const all: WindowDetector[] = [probe];
    t.equal(all.length, 1, 'and it goes in the registry with the others');
  },
);

t.test('a finding that says `now` is raised in its first bucket; others wait for `running` buckets', async (t) => {
  const d = probing(
    probe('test.now', 2, (w) => {
      const f = w.at(w.bucket);
      if (!f?.bad) return null;
      return { severity: 'warning', title: w.key.join('/'), description: '', data: {}, now: (f.sure ?? 0) > 0 };
    }),
  );
  const raisedIn = (i: number, signals: SignalMessage['signals']): string[] =>
    d
      .apply({ v: 1, shard: 0, from: i, up_to: i + 1, clock: t0 + (i + 1) * 60_000, signals })
      .changes.filter((c) => c.raised)
      .map((c) => c.row.title);
  t.same(
    raisedIn(0, [
      ['probe', ['acme', 'a'], minute(0), { bad: 1 }],
      ['probe', ['acme', 'b'], minute(0), { bad: 1, sure: 1 }],
    ]),
    ['b'],
    'the sure finding at once; the other has one bucket of two',
  );
  t.same(raisedIn(1, [['probe', ['acme', 'a'], minute(1), { bad: 1 }]]), ['a'], 'the other in its second bucket');
});

t.test(
  'shards that report apart: an alert waits until every live shard has reported up to where it was found',
  async (t) => {
    // Fires when at least half of a bucket's sessions failed, with 3 failures at least; says how many it saw.
    const half = probe('test.half', 1, (w) => {
      const f = w.at(w.bucket);
      const bad = f?.bad ?? 0;
      if (bad < 3 || 2 * bad < (f?.n ?? 0)) return null;
      return { severity: 'warning', title: `${bad} of ${f?.n ?? 0}`, description: '', data: {} };
    });
    const c = t0 + 60_000;
    const ups = new Map<number, number>();
    const said = (changes: AlertChange[]): string[] =>
      changes.map((x) => `${x.raised ? 'raised' : 'resolved'} ${x.row.title} at ${x.row.created_at - c}`);
    const batch = (d: Detection, shard: number, clock: number, fields?: Record<string, number>, i = 0): string[] => {
      const upTo = (ups.get(shard) ?? 0) + 1;
      ups.set(shard, upTo);
      const signals: SignalMessage['signals'] = fields ? [['probe', ['acme', 'k'], minute(i), fields]] : [];
      return said(d.apply({ v: 1, shard, from: upTo - 1, up_to: upTo, clock, signals }).changes);
    };
    const twoShards = (): Detection => {
      ups.clear();
      const d = probing(half);
      batch(d, 0, c);
      batch(d, 1, c);
      return d;
    };

    const d = twoShards();
    t.same(batch(d, 0, c + 1000, { bad: 3, n: 4 }), [], "found on shard 0's part: held");
    t.same(batch(d, 1, c + 500, { bad: 2, n: 4 }), [], 'shard 1 is not there yet');
    t.same(batch(d, 1, c + 1200, { bad: 1, n: 2 }), ['raised 6 of 10 at 1200'], 'raised as both parts describe it');
    t.equal(d.openIncidents, 1);

    const fluke = twoShards();
    t.same(batch(fluke, 0, c + 1000, { bad: 3, n: 4 }), []);
    t.same(batch(fluke, 1, c + 1000, { bad: 0, n: 20 }), [], 'with the whole under half, nothing is raised');
    t.equal(fluke.openIncidents, 0, 'and nothing stays open');

    const silent = twoShards();
    t.same(batch(silent, 0, c + 1000, { bad: 3, n: 4 }), []);
    t.same(silent.tick(c + shardLiveMs - 1), [], 'shard 1 may still report');
    t.same(
      said(silent.tick(c + shardLiveMs)),
      [`raised 3 of 4 at ${shardLiveMs}`],
      'a shard silent that long is not waited for',
    );

    const lagging = twoShards();
    t.same(batch(lagging, 0, c + 1000, { bad: 3, n: 4 }), []);
    for (let at = c + 5000; at < c + 1000 + maxHoldMs; at += 5000) {
      t.same(lagging.tick(at), []);
      t.same(batch(lagging, 1, c + 200), [], 'shard 1 reports, still behind');
    }
    t.same(
      said(lagging.tick(c + 1000 + maxHoldMs)),
      [`raised 3 of 4 at ${1000 + maxHoldMs}`],
      'waited for at most maxHoldMs',
    );

    const saved = twoShards();
    t.same(batch(saved, 0, c + 1000, { bad: 3, n: 4 }), []);
    const loaded = probing(half);
    loaded.load(structuredClone(saved.save()));
    t.same(
      batch(loaded, 1, c + 1200, { bad: 1, n: 2 }),
      ['raised 4 of 6 at 1200'],
      'a held alert survives a checkpoint',
    );

    const behind = twoShards();
    t.same(batch(behind, 0, c + 2000, { bad: 2, n: 4 }), []);
    t.same(
      batch(behind, 1, c + 1000, { bad: 2, n: 2 }),
      ['raised 4 of 6 at 2000'],
      'found on the batch of the shard behind: the others have passed its clock, so it is raised at once',
    );

    const next = twoShards();
    t.same(batch(next, 0, c + 1000, { bad: 3, n: 4 }), []);
    t.same(
      batch(next, 1, c + 1500, { bad: 0, n: 1 }, 1),
      ['raised 3 of 4 at 1500'],
      'the next minute, begun without the condition, does not drop it',
    );
  },
);
