import t from 'tap';
import { pipelines } from '../../pipelines/index.js';
import type { Emitter, SessionAttrs } from '../../src/metric/pipeline.js';
import { noAttrs } from '../../src/aggregate/runtime.js';

// A pipeline that names the attributes its `session` hook reads is skipped when none of them changed. Here: changing
// any other attribute, from sessions in every shape (open, started, closed, failed), never changes its output.

const t0 = Date.UTC(2026, 10, 20, 10);
const open: SessionAttrs = {
  ...noAttrs('acme', 's1'),
  content_id: 'match-1',
  region: 'Goa',
  country: 'IN',
  pop: 'bom1',
  device: 'tv',
  viewer: 'u1',
  first_minute: t0,
  last_hour: t0 + 7_200_000,
};
const started = {
  ...open,
  started_at: t0,
  startup_ms: 1800,
  startup_at: t0 + 1800,
  furthest_sec: 600,
  duration_sec: 3600,
};
const shapes: Record<string, SessionAttrs> = {
  open,
  started,
  ended: { ...started, closed_at: t0 + 3_600_000, ended: true },
  failed: { ...started, fatal_at: t0 + 60_000, closed_at: t0 + 60_000 },
};

/** Other values of an attribute: a changed value, and null where the type allows it. */
function variants(k: keyof SessionAttrs, v: SessionAttrs[keyof SessionAttrs]): Array<SessionAttrs[keyof SessionAttrs]> {
  if (typeof v === 'string') return ['', `${v}-other`];
  if (typeof v === 'boolean') return [!v];
  const nullable = k !== 'furthest_sec';
  if (v === null) return [t0 + 123_456];
  return nullable ? [v + 123_456, null] : [v + 123_456];
}

function output(session: NonNullable<(typeof pipelines)[number]['session']>, a: SessionAttrs): string {
  const calls: unknown[] = [];
  const out: Emitter = {
    add: (table, key, values) => calls.push(['add', table.name, key, values]),
    addSeconds: (table, tenant, from, to, sign) => calls.push(['seconds', table.name, tenant, from, to, sign]),
    put: (table, row) => calls.push(['put', table.name, row]),
    append: (table, row) => calls.push(['append', table.name, row]),
    signal: (name, key, minute, fields) => calls.push(['signal', name, key, minute, fields]),
  };
  session(a, 1, out);
  return JSON.stringify(calls);
}

const declared = pipelines.filter((p) => p.session && p.sessionReads);
t.ok(declared.length > 0, 'at least one pipeline names what its session hook reads');
for (const p of declared) {
  t.test(`${p.name}: session depends only on ${p.sessionReads!.join(', ')}`, async (t) => {
    const reads = new Set<string>(p.sessionReads);
    let outputs = 0;
    for (const [shape, base] of Object.entries(shapes)) {
      const expected = output(p.session!, base);
      if (expected !== '[]') outputs++;
      for (const k of Object.keys(base) as Array<keyof SessionAttrs>) {
        if (reads.has(k)) continue;
        for (const v of variants(k, base[k])) {
          t.equal(output(p.session!, { ...base, [k]: v }), expected, `${shape} session, ${k} = ${JSON.stringify(v)}`);
        }
      }
    }
    t.ok(outputs > 0, 'some shape gives output, so a change could show');
  });
}
