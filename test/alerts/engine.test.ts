import t from 'tap';
import { alertIdentity, Detection, resolveMs } from '../../src/alerts/engine.js';
import { detectors, effective, loadThresholds } from '../../src/alerts/thresholds.js';
import type { SignalMessage } from '../../src/bus/wire.js';

// The engine's bookkeeping, message by message: shards' partial counts add up, a repeated batch counts once, time
// passes by ticks alone, ids are a function of the incident, state survives save and load.

const defaults = loadThresholds();
const engine = (): Detection => new Detection({ detectors, thresholds: (_t, c) => effective(defaults, null, c) });
const t0 = Date.UTC(2026, 10, 21, 10, 0, 0);
const minute = (i: number): number => (t0 + i * 60_000) / 1000;

/** One shard's batch: payments of minute `i` (with `failed` of them failing), the clock at that minute's end. */
function payments(shard: number, upTo: number, i: number, all: number, failed: number): SignalMessage {
  return { v: 1, shard, from: upTo - 1, up_to: upTo, clock: t0 + (i + 1) * 60_000, signals: [['billing', ['acme'], minute(i), { payments: all, failed, cancellations: 0 }]] };
}

t.test('partial counts from shards add up: neither shard alone crosses the threshold', async (t) => {
  const d = engine();
  // 15 minutes of 20 payments, 1 failing, on each of two shards; then a minute where each shard sees 6 of 10 fail.
  let seq = 0;
  for (let i = 0; i < 15; i++) for (const shard of [0, 1]) t.same(d.apply(payments(shard, ++seq, i, 20, 1)).changes, []);
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
  t.same(d.save().keys.map((k) => k[0]), ['billing.churn_spike'], 'payment buckets past their hour of history are gone, and their key');
  d.tick(last + 8 * 86_400_000);
  t.same(d.save().keys, [], 'and after a week, the churn buckets too');
});

t.test('alert ids are a function of the incident; a saved and loaded engine goes on identically', async (t) => {
  t.same(alertIdentity('acme', 'qos.rebuffer_spike', 'Goa\u0001pop1\n1795000000'), alertIdentity('acme', 'qos.rebuffer_spike', 'Goa\u0001pop1\n1795000000'));
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
