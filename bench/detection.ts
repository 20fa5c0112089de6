// npm run bench:detection -- [options]: a steady simulated day through the aggregation runtime and the alerts
// engine in process, on event time; every alert it raises is a false one (issue 32, docs/alerts.md).

import { parseArgs } from 'node:util';
import { DetectionRun, wireOf } from './simulator/detect.js';
import { dayAudience, steadyDay } from './simulator/day.js';
import { Fleet } from './simulator/fleet.js';
import { positive, UsageError } from './simulator/incidents.js';

const usage = `usage: npm run bench:detection -- [--viewers 2000] [--hours 24] [--seed 1] [--noise 0.15] [--blips 2]
--viewers: concurrent viewers at the evening peak; --noise: minute-to-minute drift of each region's levels;
--blips: short sub-threshold rises per simulated hour.`;

/** How long after its last event a client's batch arrives (ms). */
const latencyMs = 300;

function main(): void {
  const { values } = parseArgs({
    options: {
      viewers: { type: 'string', default: '2000' },
      hours: { type: 'string', default: '24' },
      seed: { type: 'string', default: '1' },
      noise: { type: 'string', default: '0.15' },
      blips: { type: 'string', default: '2' },
    },
    strict: true,
  });
  const viewers = positive(values.viewers, 'viewers');
  const hours = positive(values.hours, 'hours');
  const seed = positive(values.seed, 'seed');
  const noise = Number(values.noise);
  const blips = Number(values.blips);
  if (!(noise >= 0) || !(blips >= 0)) throw new UsageError('--noise and --blips must be numbers, 0 or more');
  // 00:00 IST of a weekday.
  const startAt = Date.UTC(2026, 10, 23, 18, 30);
  const durationMs = Math.round(hours * 3_600_000);
  const day = steadyDay({ seed, noise, blipsPerHour: blips, hours });
  const fleet = new Fleet({ tenant: 'acme', viewers, startAt, durationMs, seed, incidents: [], audience: (x) => dayAudience(x * hours), levels: day.levels });
  const run = new DetectionRun();
  const began = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  let reported = startAt;
  for (let t = startAt + 10_000; !fleet.done; t += 10_000) {
    for (const d of fleet.advance(t)) {
      let last = 0;
      for (const e of d.events) last = Math.max(last, e.ts);
      for (const e of d.events) run.push(wireOf(e, last + latencyMs));
    }
    if (t - reported >= 3_600_000) {
      reported = t;
      process.stderr.write(`  ${new Date(t + 5.5 * 3_600_000).toISOString().slice(11, 16)} IST: ${run.events.toLocaleString('en')} events, ${run.raised.length} alerts\n`);
    }
  }
  run.finish();
  const seconds = Number(process.hrtime.bigint() - began) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  // A title's first playback is news once, whatever the day: not a false alert.
  const falseAlerts = run.raised.filter((r) => r.category !== 'content.new_release_detected');
  const byCategory = new Map<string, number>();
  for (const r of falseAlerts) byCategory.set(r.category, (byCategory.get(r.category) ?? 0) + 1);
  const out = {
    day: 'steady',
    viewers,
    hours,
    seed,
    noise,
    blips_per_hour: blips,
    blips: day.blips.length,
    events: run.events,
    sessions: fleet.stats.sessions,
    peak_players: fleet.stats.peakPlayers,
    false_alerts: falseAlerts.length,
    by_category: Object.fromEntries(byCategory),
    alerts: falseAlerts.map((r) => ({ at: new Date(r.at + 5.5 * 3_600_000).toISOString().slice(11, 19) + ' IST', category: r.category, title: r.row.title, data: r.row.data })),
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
