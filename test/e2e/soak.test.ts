import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { soak } from '../../bench/soak/run.js';

// The soak's short form (docs/soak.md): two simulated matches through the distributed layout while a seeded
// schedule kills roles and NATS and fails the webhook receiver. Nothing acknowledged may be lost or counted twice,
// at each checkpoint and at the end; the long form is `npm run soak` (bench/RESULTS.md).

t.setTimeout(600_000);

t.test(
  'a short soak: faults pile up, and every answer still equals the oracle with nothing lost or stuck',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'darshak-soak-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    // Each line as it happens: a run that hangs shows where.
    const r = await soak({
      durationMs: 100_000,
      segments: 2,
      faultRate: 8,
      seed: 4,
      viewers: 150,
      dir,
      out: '',
      say: (line) => t.comment(line),
    });
    const applied = r.faults.filter((f) => !f.skipped);
    t.ok(applied.length >= 8, `${applied.length} faults applied`);
    t.ok(
      new Set(applied.map((f) => f.kind)).size >= 3,
      `of kinds ${[...new Set(applied.map((f) => f.kind))].join(', ')}`,
    );
    t.ok(r.events.accepted > 1000, `${r.events.accepted} events acknowledged`);
    t.same(r.answers, [], 'every answer equal to the oracle, at both checkpoints and at the end');
    t.same(r.events, { accepted: r.events.accepted, lost: 0, storedTwice: 0 }, 'no event lost or stored twice');
    t.same(r.sessionsWithoutRow, [], 'every session has its session_hours row');
    t.ok(r.alerts.expected > 0, `${r.alerts.expected} new-release alerts expected`);
    t.same([r.alerts.lost, r.alerts.duplicated], [[], []], 'no alert lost or raised twice');
    t.same(
      [r.webhooks.undelivered, r.webhooks.repeatedAfterSuccess],
      [[], []],
      'every alert delivered, none again after a 200',
    );
    t.same(r.stuckConsumers, [], 'no consumer stuck');
    t.same(r.crashes, [], 'no process exited on its own');
    t.same(r.slowStops, [], 'every SIGTERM drained within the grace period');
    t.ok(r.ok);
  },
);
