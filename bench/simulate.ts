// npm run simulate -- [options]: a live cricket final's audience against a running Darshak (docs/simulator.md).

import { parseArgs } from 'node:util';
import { defaultIncidents, ms, parseIncident, positive, UsageError } from './simulator/incidents.js';
import { provision } from './simulator/provision.js';
import { formatReport, simulate } from './simulator/run.js';

const usage = `usage: npm run simulate -- [--viewers N] [--duration 30m] [--speed 1] [--seed 1]
       [--incident KIND@START[+LENGTH][:REGION[/POP]]]... [--incidents default|none]
       [--ingest-url URL[,URL...]] [--api-url URL] [--api-key K --tenant SLUG --email E --password P]
       [--concurrency 64] [--settle 60s] [--out DIR]
KIND: rebuffer | startup | errors | payments; START and LENGTH like 90s, 12m, 1h (from the first ball).
Without --api-key, a new tenant is created through the darshak CLI (NATS_URL and NATS_PREFIX as the service's).`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      viewers: { type: 'string', default: '1000' },
      duration: { type: 'string', default: '30m' },
      speed: { type: 'string', default: '1' },
      seed: { type: 'string', default: '1' },
      incident: { type: 'string', multiple: true },
      incidents: { type: 'string', default: 'default' },
      'ingest-url': { type: 'string', default: process.env.INGEST_URL ?? 'http://127.0.0.1:8081' },
      'api-url': { type: 'string', default: process.env.API_URL ?? 'http://127.0.0.1:8080' },
      'api-key': { type: 'string' },
      tenant: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      concurrency: { type: 'string', default: '64' },
      settle: { type: 'string', default: '60s' },
      out: { type: 'string', default: 'simulation' },
      help: { type: 'boolean' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const durationMs = ms(values.duration, 'duration');
  if (values.incidents !== 'default' && values.incidents !== 'none')
    throw new UsageError('--incidents is default or none');
  const incidents = [
    ...(values.incidents === 'default' && !values.incident ? defaultIncidents(durationMs) : []),
    ...(values.incident ?? []).map(parseIncident),
  ];
  const given = values['api-key'] !== undefined;
  if (given && (!values.tenant || !values.email || !values.password))
    throw new UsageError('--api-key needs --tenant, --email and --password (an account that reads the analytics)');
  // Every option is checked before a tenant is made for the run.
  const run = {
    ingestUrls: values['ingest-url'].split(','),
    apiUrl: values['api-url'],
    viewers: Math.round(positive(values.viewers, 'viewers')),
    durationMs,
    speed: positive(values.speed, 'speed'),
    seed: Math.round(positive(values.seed, 'seed')),
    incidents,
    concurrency: Math.round(positive(values.concurrency, 'concurrency')),
    settleMs: ms(values.settle, 'settle'),
    out: values.out,
    log: (line: string) => console.error(line),
  };
  const account = given
    ? { tenant: values.tenant!, apiKey: values['api-key']!, email: values.email!, password: values.password! }
    : await provision(`sim-${run.seed}`, `Simulated final ${run.seed}`);
  if (!given) console.error(`created tenant ${account.tenant} (owner ${account.email}, password ${account.password})`);
  const options = { ...run, ...account };
  const result = await simulate(options);
  console.log(formatReport(options, result));
  if (options.out) console.log(`ground truth and report: ${options.out}/truth.json, concurrency.csv, report.json`);
  if (result.answers.some((a) => !a.exact) || result.send.lost > 0) process.exitCode = 1;
}

main().catch((err: Error) => {
  console.error(err.message);
  if (err instanceof UsageError || err instanceof TypeError) console.error(usage);
  process.exitCode = 2;
});
