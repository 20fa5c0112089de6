import t from 'tap';
import { detect } from '../bench/simulator/detect.js';
import { normal, playback, type Audience } from '../test/helpers/traffic.js';
const t0 = Date.UTC(2026, 10, 20, 12, 0, 0);
const minute = 60_000;
const versions = ['5.10.0', '5.11.0', '5.12.0', '5.12.1', '5.13.0'];
const a: Audience = {
  tenant: 'acme',
  places: { Maharashtra: ['mum1'] },
  perPop: 150,
  contents: ['c1', 'c2', 'c3', 'c4'],
  appVersions: versions,
  conditions: (ts, _r, pop, app) =>
    ts >= t0 + 40 * minute && ts < t0 + 50 * minute && pop === 'mum1' && app === '5.13.0'
      ? { ...normal, stallChance: 0.3 }
      : normal,
};
const ev = playback(a, t0, t0 + 56 * minute);
const per = new Map<number, number>();
for (const e of ev)
  if (e.event_type === 'rebuffer_start' && (e.context as Record<string, string>).app_version === '5.13.0') {
    const m = Math.floor((e.ts - t0) / minute);
    per.set(m, (per.get(m) ?? 0) + 1);
  }
console.log([...per].filter(([m]) => m >= 36 && m <= 46));
const r = detect(ev);
for (const x of r.raised) console.log(x.category, (x.at - t0) / 1000, x.row.title, JSON.stringify(x.row.data.cohort));
t.pass();
import { rebufferSpike } from '../pipelines/qos.js';
import { sumFields } from '../src/alerts/detector.js';
const orig = rebufferSpike.evaluate;
rebufferSpike.evaluate = (w) => {
  const f = orig(w);
  const m = (w.bucket * 1000 - t0) / minute;
  if (m >= 39 && m <= 42) {
    const c = sumFields(w, w.bucket - 60, w.bucket + 60, false, 'cohorts');
    console.log('eval', m, !!f, w.at(w.bucket)?.stalled, c['s@app_version=5.13.0'], c['a@app_version=5.13.0']);
  }
  return f;
};
detect(ev);
