// npm run soak -- [--duration 3m] [--fault-rate 6] [--seed 1] [--segments N] [--viewers 150] [--cluster] [--out soak] [--keep]
// The distributed layout under simulated matches and a seeded schedule of faults (docs/soak.md); exits 1 when
// anything was lost, counted twice, stuck or crashed.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ms, positive, UsageError } from './simulator/incidents.js';
import { lateAfterMs, soak, type SoakResult } from './soak/run.js';

const usage =
  'usage: npm run soak -- [--duration 3m] [--fault-rate 6] [--seed 1] [--segments N] [--viewers 150] [--cluster] [--out soak] [--keep]';

function summary(r: SoakResult): string {
  const applied = r.faults.filter((f) => !f.skipped);
  const counts = new Map<string, number>();
  for (const f of applied) {
    const k = f.kind === 'kill' || f.kind === 'term' ? `${f.kind} ${f.role}` : f.kind;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const byKind = [...counts].map(([k, n]) => `${k} x${n}`).join(', ');
  const list = (xs: readonly string[]): string =>
    xs.length === 0 ? '0' : `${xs.length}: ${xs.slice(0, 10).join('; ')}${xs.length > 10 ? '; …' : ''}`;
  return [
    `soak seed ${r.seed}: ${applied.length} faults (${r.faults.length - applied.length} skipped): ${byKind}`,
    `events acknowledged ${r.events.accepted}: lost ${r.events.lost}, stored twice ${r.events.storedTwice}; sessions without a session_hours row ${list(r.sessionsWithoutRow)}`,
    `late stalls for ${r.late.sessions} sessions of matches over for ${lateAfterMs / 60_000} min (${r.late.events} events): ${r.late.recalled} of those sessions recalled from the store`,
    `answers unlike the oracle: ${list(r.answers)}`,
    `alerts expected ${r.alerts.expected}: lost ${list(r.alerts.lost)}, duplicated ${list(r.alerts.duplicated)}`,
    `webhook deliveries expected ${r.webhooks.expected}: undelivered ${list(r.webhooks.undelivered)}, waiting for their next attempt ${list(r.webhooks.waitingForRetry)}, repeated after a success ${list(r.webhooks.repeatedAfterSuccess)}; sent again because their sender was stopped before recording them (at least once) ${list(r.webhooks.resentAfterSenderStopped)}`,
    `stuck consumers ${list(r.stuckConsumers)}; processes that exited on their own ${list(r.crashes.map((c) => c.split('\n')[0]!))}`,
    `roles that did not stop within the grace period after SIGTERM ${list(r.slowStops.map((c) => c.split('\n')[0]!))}`,
    r.ok ? 'OK: nothing lost, nothing counted twice, nothing stuck' : 'FAILED',
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '3m' },
      'fault-rate': { type: 'string', default: '6' },
      seed: { type: 'string', default: '1' },
      segments: { type: 'string' },
      viewers: { type: 'string', default: '150' },
      cluster: { type: 'boolean', default: false },
      out: { type: 'string', default: 'soak' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return void console.log(usage);
  const durationMs = ms(values.duration, 'duration');
  // A checkpoint every 90 s of traffic unless told.
  const segments = Math.round(
    positive(values.segments ?? String(Math.max(1, Math.round(durationMs / 90_000))), 'segments'),
  );
  const dir = mkdtempSync(join(tmpdir(), 'darshak-soak-'));
  const started = Date.now();
  const say = (line: string): void =>
    console.error(`[${((Date.now() - started) / 1000).toFixed(1).padStart(7)} s] ${line}`);
  try {
    const result = await soak({
      durationMs,
      segments,
      faultRate: positive(values['fault-rate'], 'fault-rate'),
      seed: Math.round(positive(values.seed, 'seed')),
      viewers: Math.round(positive(values.viewers, 'viewers')),
      cluster: values.cluster,
      dir,
      out: values.out,
      say,
    });
    console.log(summary(result));
    if (values.out) console.log(`schedule and report: ${values.out}/schedule.json, ${values.out}/report.json`);
    if (!result.ok) process.exitCode = 1;
  } finally {
    if (values.keep) console.log(`the layout's stores and NATS's are kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

// Stopped by a signal: exit, so that the layout's `exit` handler kills its processes.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

main().catch((err: Error) => {
  // A bad option is the user's to fix: its message and the usage; anything else keeps its stack for whoever debugs it.
  const usageError = err instanceof UsageError || err instanceof TypeError;
  console.error(usageError ? `${err.message}\n\n${usage}` : (err.stack ?? err.message));
  process.exitCode = 2;
});
