import t from 'tap';
import { pipelines } from '../../pipelines/index.js';
import type { Emitter, Pipeline, SessionAttrs } from '../../src/metric/pipeline.js';
import { noAttrs } from '../../src/aggregate/runtime.js';

// A pipeline's `sessionChange` is a shortcut: it must emit exactly the net of retracting the old attributes and adding
// the new ones with `session`. Checked here over pairs of attributes that move the span by an hour, across days and
// windows, move its start, change the viewer, region or content, or start from nothing.

/** Net output per call kind and key: what the accumulator would merge it to. */
function net(run: (out: Emitter) => void): Record<string, number[]> {
  const sums = new Map<string, number[]>();
  const add = (k: string, values: readonly number[]): void => {
    const prev = sums.get(k) ?? values.map(() => 0);
    sums.set(
      k,
      prev.map((v, i) => v + values[i]!),
    );
  };
  run({
    add: (table, key, values) => add(JSON.stringify(['add', table.name, key]), values),
    addSeconds: (table, tenant, from, to, sign) => {
      for (let s = from; s < to; s++) add(JSON.stringify(['seconds', table.name, tenant, s]), [sign]);
    },
    put: () => t.fail('a session hook puts no rows'),
    append: () => t.fail('a session hook appends no rows'),
    signal: (name, key, minute, fields) => {
      for (const [f, v] of Object.entries(fields)) add(JSON.stringify(['signal', name, key, minute, f]), [v]);
    },
  });
  return Object.fromEntries([...sums].filter(([, v]) => v.some((x) => x !== 0)).sort());
}

const minute = 60_000;
const hour = 60 * minute;
const t0 = Date.UTC(2026, 10, 20, 22, 50);
const base: SessionAttrs = {
  ...noAttrs('acme', 's1'),
  content_id: 'c1',
  region: 'Goa',
  viewer: 'u1',
  first_minute: t0,
  last_hour: t0 - 50 * minute,
};
const cases: Array<[string, SessionAttrs, SessionAttrs]> = [
  ['into the next hour', base, { ...base, last_hour: base.last_hour! + hour }],
  ['past midnight', base, { ...base, last_hour: base.last_hour! + 3 * hour }],
  ['across a window', base, { ...base, last_hour: base.last_hour! + 40 * 24 * hour }],
  ['a start minutes earlier, same hour', base, { ...base, first_minute: t0 - 20 * minute }],
  ['a start hours earlier', base, { ...base, first_minute: t0 - 3 * hour }],
  ['the viewer named', { ...base, viewer: 'a1' }, { ...base, last_hour: base.last_hour! + hour }],
  ['another region', base, { ...base, region: 'Kerala' }],
  ['a content found', { ...base, content_id: '' }, base],
  ['the first event', noAttrs('acme', 's1'), base],
  ['no viewer yet', { ...base, viewer: '' }, { ...base, viewer: '', last_hour: base.last_hour! + hour }],
  [
    'further, with a duration',
    { ...base, duration_sec: 3600, furthest_sec: 60 },
    { ...base, duration_sec: 3600, furthest_sec: 90 },
  ],
  ['further, without one', { ...base, furthest_sec: 60 }, { ...base, furthest_sec: 90 }],
  ['a duration found', { ...base, furthest_sec: 60 }, { ...base, duration_sec: 3600, furthest_sec: 60 }],
  [
    'ended',
    { ...base, duration_sec: 3600, furthest_sec: 60 },
    { ...base, duration_sec: 3600, furthest_sec: 60, ended: true, closed_at: t0 + hour },
  ],
  [
    'further after closing',
    { ...base, duration_sec: 3600, furthest_sec: 60, closed_at: t0 + hour },
    { ...base, duration_sec: 3600, furthest_sec: 90, closed_at: t0 + hour },
  ],
  [
    'an earlier start minute',
    { ...base, duration_sec: 3600, furthest_sec: 60 },
    { ...base, duration_sec: 3600, furthest_sec: 60, first_minute: t0 - minute },
  ],
];

const withChange = pipelines.filter(
  (p): p is Pipeline & Required<Pick<Pipeline, 'session' | 'sessionChange'>> => !!p.session && !!p.sessionChange,
);
t.ok(withChange.length > 0, 'some pipeline has a sessionChange');
for (const p of withChange) {
  t.test(`${p.name}: sessionChange is the net of session`, async (t) => {
    for (const [label, before, after] of cases) {
      const want = net((out) => {
        p.session(before, -1, out);
        p.session(after, 1, out);
      });
      t.same(
        net((out) => p.sessionChange(before, after, out)),
        want,
        label,
      );
    }
  });
}
