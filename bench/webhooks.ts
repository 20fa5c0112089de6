// Webhook delivery benchmark (npm run bench:webhooks). Three figures, each with the machine:
//
// 1. Throughput: N events for one tenant are published to the webhook events stream of a fresh namespace, then the
//    webhooks role (WebhookService, as `darshak start --role webhooks` runs it, in this process) fans them out to one
//    endpoint and delivers them: signed, through the SSRF guard, each attempt logged. The receiver is a node:http
//    server in a child process (answers 200). Deliveries/s = N / time from the service's start to the last log entry,
//    and, in the same run, as a share of bare POSTs of the same body to the same receiver (the floor).
// 2. Latency: one event every 20 ms; the time from publishWebhookEvent's call (what the alerts role does when an alert
//    fires) to the receiver having the request. p50/p99.
// 3. Detection to delivery: the ingest, aggregate (4 shards) and alerts roles join the webhooks role in this process.
//    Every 25 ms a client posts the first play of a title never seen before: the event that crosses a threshold
//    (content.new_release_detected). The time from the POST to the receiver having the alert's webhook, p50/p99. The
//    path is the whole of an alert's: ingest → events stream → aggregator batch (sealed every 500 ms) → signals →
//    alerts role → webhook event → fan-out → signed delivery.
// 4. The same for QoS alerts (qos.error_spike), which also wait for every shard's part of the data: each probe a
//    region whose current minute, posted at once, fails against a quiet baseline sent beforehand.
//
//   npm run bench:webhooks [-- --events 20000 --probes 200 --concurrency 64 --qos-probes 100]

import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, request } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultMaxPerHour } from '../src/alerts/engine.js';
import { Bus } from '../src/bus/bus.js';
import { removeNamespace } from '../src/bus/namespace.js';
import { loadConfig } from '../src/config/load.js';
import { ControlPlane } from '../src/control/control-plane.js';
import { createLogger } from '../src/log.js';
import { Services, startModules, type Started } from '../src/modules.js';
import { registry } from '../src/registry.js';
import { newEventId, publishWebhookEvent } from '../src/contracts/webhook-events.js';
import { Mailer } from '../src/webhooks/mailer.js';
import { WebhookService } from '../src/webhooks/service.js';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '20000' },
    probes: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '64' },
    'qos-probes': { type: 'string', default: '100' },
  },
});
/** A count from the command line: a whole number, 1 or more, or the usage and exit 2. */
function count(name: keyof typeof args): number {
  const n = Number(args[name]);
  if (Number.isInteger(n) && n >= 1) return n;
  console.error(
    `--${name} must be a whole number, 1 or more, got ${JSON.stringify(args[name])}\n\nusage: npm run bench:webhooks -- [--events 20000] [--probes 200] [--concurrency 64] [--qos-probes 100]`,
  );
  process.exit(2);
}
const events = count('events');
const probes = count('probes');
const concurrency = count('concurrency');
const qosProbes = count('qos-probes');
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = createLogger('warn');

console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${process.platform}`,
);

// The receiver: counts requests, reports probes (path /probe) at once over IPC with their arrival time.
const receiverCode = `
const http = require('node:http');
let count = 0;
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    count++;
    if (req.url === '/probe') process.send({ probe: req.headers['x-service-delivery'], at: Date.now() });
    if (req.url === '/detect') process.send({ detect: JSON.parse(Buffer.concat(chunks).toString()).data.content_id, at: Date.now() });
    if (req.url === '/qos') process.send({ qos: JSON.parse(Buffer.concat(chunks).toString()).data.region, at: Date.now() });
    res.writeHead(200).end();
  });
});
server.keepAliveTimeout = 1000;
process.on('message', (m) => { if (m === 'count') process.send({ count }); if (m === 'exit') process.exit(0); });
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
`;

function startReceiver(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['-e', receiverCode], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve) => {
    const onPort = (m: { port?: number }): void => {
      if (m.port) {
        child.off('message', onPort);
        resolve({ child, port: m.port });
      }
    };
    child.on('message', onPort);
  });
}

function received(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    const on = (m: { count?: number }): void => {
      if (m.count !== undefined) {
        child.off('message', on);
        resolve(m.count);
      }
    };
    child.on('message', on);
    child.send('count');
  });
}

const pct = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;

const prefix = `bench${Date.now().toString(36)}`;
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
const { child, port } = await startReceiver();
let service: WebhookService | undefined;
let roles: Started | undefined;
try {
  const control = await ControlPlane.open(bus);
  await control.createTenant({
    slug: 'bench',
    name: 'Bench',
    plan: 'enterprise',
    ownerEmail: 'owner@bench.test',
    ownerPassword: 'correct horse battery',
  });
  const ep = await control.webhooks.create('bench', {
    url: `http://127.0.0.1:${port}/hook`,
    categories: ['qos.rebuffer_spike'],
  });
  const data = {
    severity: 'warning',
    region: 'Maharashtra',
    pop: 'bom1',
    current_rate: 6.5,
    baseline_rate: 2,
    affected_sessions: 40,
  };
  const event = () => ({
    id: newEventId(),
    type: 'qos.rebuffer_spike',
    created_at: new Date().toISOString(),
    tenant_slug: 'bench',
    data,
  });
  for (let i = 0; i < events; i += 500)
    await Promise.all(Array.from({ length: Math.min(500, events - i) }, () => publishWebhookEvent(bus, event())));

  const mailer = new Mailer({ smtp_url: '', data_dir: '/tmp', public_base_url: 'http://127.0.0.1:8080' });
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  service = await WebhookService.start(bus, control, mailer, log, {
    allowHosts: ['127.0.0.0/8'],
    dashboardUrl: 'http://127.0.0.1:8080',
    concurrency,
  });
  const logged = async (): Promise<number> => (await bus.jsm.streams.info(bus.names.webhookLogStream)).state.messages;
  // The log keeps 200 per endpoint, so count what the log stream has ever taken (its last sequence).
  const lastLogSeq = async (): Promise<number> =>
    (await bus.jsm.streams.info(bus.names.webhookLogStream)).state.last_seq;
  while ((await lastLogSeq()) < events) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const got = await received(child);
  console.log(
    `throughput: ${events} events → ${got} deliveries received, ${await lastLogSeq()} attempts logged (${await logged()} kept) in ${seconds.toFixed(2)} s = ${Math.round(events / seconds)} deliveries/s (concurrency ${concurrency})`,
  );
  // Per CPU-second of this process (the webhooks role, and this loop's polls): what one core would do were the
  // role alone on it, whatever else the machine runs (NATS, the receiver, other work).
  console.log(
    `  ${cpuSeconds.toFixed(2)} CPU-s in this process: ${Math.round(events / cpuSeconds)} deliveries per CPU-second`,
  );
  // In the same run, the floor: bare POSTs of a delivery-sized body to the same receiver from this process, as many
  // at once, through a node:http keep-alive agent like the webhooks role's (src/webhooks/send.ts), with no NATS, no
  // signing, no SSRF check and no log. (fetch is no floor: it was slower than the role itself.)
  const body = JSON.stringify(event());
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const post = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: '/bare',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  let sent = 0;
  const bareStarted = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < events) {
        sent++;
        await post();
      }
    }),
  );
  agent.destroy();
  const bare = events / ((performance.now() - bareStarted) / 1000);
  console.log(
    `bare POSTs (node:http keep-alive agent, ${concurrency} at once, same receiver): ${Math.round(bare)}/s; deliveries run at ${((events / seconds / bare) * 100).toFixed(0)}% of it`,
  );

  /** Probes by their key in the receiver's report (`kind`), when each was sent, and the delays measured. */
  const measure = (kind: 'probe' | 'detect' | 'qos'): { posted: Map<string, number>; delays: number[] } => {
    const posted = new Map<string, number>();
    const delays: number[] = [];
    child.on('message', (m: { probe?: string; detect?: string; qos?: string; at?: number }) => {
      const probe = m[kind];
      const t0 = probe ? posted.get(probe) : undefined;
      if (t0 !== undefined && m.at !== undefined) delays.push(m.at - t0);
    });
    return { posted, delays };
  };
  /** Wait up to `waitMs` for every probe, then print their p50, p99 and max. */
  const report = async (what: string, delays: number[], expected: number, noun: string, waitMs: number) => {
    const until = Date.now() + waitMs;
    while (delays.length < expected && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    delays.sort((a, b) => a - b);
    console.log(
      `${what}, ${delays.length}/${expected} ${noun}: p50 ${pct(delays, 50)} ms, p99 ${pct(delays, 99)} ms, max ${delays.at(-1)} ms`,
    );
  };

  // Latency: probes to a second endpoint.
  await control.webhooks.update('bench', ep.id, { categories: ['billing.churn_spike'] });
  await control.webhooks.create('bench', { url: `http://127.0.0.1:${port}/probe`, categories: ['qos.error_spike'] });
  await new Promise((r) => setTimeout(r, 300));
  const { deliveryId } = await import('../src/contracts/webhook-events.js');
  const probeEndpoint = (await control.webhooks.list('bench')).find((e) => e.url.endsWith('/probe'))!;
  const published = measure('probe');
  for (let i = 0; i < probes; i++) {
    const e = { ...event(), type: 'qos.error_spike' };
    published.posted.set(deliveryId(e.id, probeEndpoint.id), Date.now());
    await publishWebhookEvent(bus, e);
    await new Promise((r) => setTimeout(r, 20));
  }
  await report('latency (publishWebhookEvent → received)', published.delays, probes, 'probes', 10_000);

  // Detection to delivery, through the roles that carry an alert. A tenant's alerts of one category past
  // `defaultMaxPerHour` in an hour are summed into one summary alert: the probes are spread over tenants of that many.
  const config = loadConfig({
    overrides: {
      nats_url: natsUrl,
      nats_prefix: prefix,
      ingest_port: 0,
      base_port: 0,
      data_dir: mkdtempSync(join(tmpdir(), 'bench-detect-')),
    },
  });
  roles = await startModules(registry, ['ingest', 'aggregate', 'alerts'], new Services(config, log));
  const ingestUrl = `http://127.0.0.1:${roles.services.listeners.get('ingest')!.port}/v1/ingest/events`;
  const keys: string[] = [];
  for (let k = 0; k < Math.ceil(Math.max(probes, qosProbes) / defaultMaxPerHour); k++) {
    const slug = `probe-${k}`;
    await control.createTenant({
      slug,
      name: `Probe ${k}`,
      plan: 'enterprise',
      ownerEmail: `owner@${slug}.test`,
      ownerPassword: 'correct horse battery',
    });
    keys.push((await control.apiKeys.create({ tenant: slug, name: 'bench', environment: 'production' })).key);
    await control.webhooks.create(slug, {
      url: `http://127.0.0.1:${port}/detect`,
      categories: ['content.new_release_detected'],
    });
    await control.webhooks.create(slug, { url: `http://127.0.0.1:${port}/qos`, categories: ['qos.error_spike'] });
  }
  const keyOf = (probe: number): string => keys[Math.floor(probe / defaultMaxPerHour)]!;
  const ingest = async (key: string, batch: Array<Record<string, unknown>>): Promise<void> => {
    for (;;) {
      const r = await fetch(ingestUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        // With its clock, so that events of past minutes keep their times (CONTRACT §4 "Timestamps").
        body: JSON.stringify({ sent_at: new Date().toISOString(), events: batch }),
      });
      if (r.status === 200) return;
      // Shed under load: wait as told and send it again.
      if (r.status !== 429 && r.status !== 503) throw new Error(`ingest answered ${r.status}: ${await r.text()}`);
      await new Promise((w) => setTimeout(w, 1000 * Number(r.headers.get('retry-after') ?? 1)));
    }
  };
  await new Promise((r) => setTimeout(r, 1000));
  const releases = measure('detect');
  const sends: Array<Promise<unknown>> = [];
  for (let i = 0; i < probes; i++) {
    const title = `premiere-${i}`;
    const event = {
      event_type: 'play_start',
      ts: new Date().toISOString(),
      session_id: `s-${i}`,
      anonymous_id: `a-${i}`,
    };
    releases.posted.set(title, Date.now());
    sends.push(ingest(keyOf(i), [{ ...event, content_id: title }]));
    await new Promise((r) => setTimeout(r, 25));
  }
  await Promise.all(sends);
  await report('detection to delivery (ingest POST → webhook received)', releases.delays, probes, 'alerts', 15_000);

  // The same for a QoS alert, which is raised once every shard has reported its part of the data (docs/alerts.md
  // "Incidents"). Each probe is a region of its own: 30 sessions playing without error for 33 minutes, sent
  // beforehand (minutes too old to raise anything, which feed the baseline), then one batch of their current minute
  // in which half of them fail. The sessions are spread over the shards as ingest routes them.
  const sessions = 30;
  const minute = 60_000;
  const qosEvent = (probe: number, s: number, type: string, ts: number, fatal = false): Record<string, unknown> => ({
    event_type: type,
    ts: new Date(ts).toISOString(),
    session_id: `q${probe}-${s}`,
    anonymous_id: `qa${probe}-${s}`,
    content_id: 'qos-bench',
    context: { region: `Bench ${probe}`, country: 'IN' },
    ...(fatal && { properties: { fatal: true, code: 'BENCH_FATAL' } }),
  });
  const qosStart = Date.now();
  for (let probe = 0; probe < qosProbes; probe++) {
    const baseline: Array<Record<string, unknown>> = [];
    for (let s = 0; s < sessions; s++) {
      baseline.push(qosEvent(probe, s, 'play_start', qosStart - 33 * minute + s * 1000));
      for (let m = 32; m >= 1; m--) baseline.push(qosEvent(probe, s, 'heartbeat', qosStart - m * minute + s * 1000));
    }
    for (let i = 0; i < baseline.length; i += 500) await ingest(keyOf(probe), baseline.slice(i, i + 500));
  }
  await new Promise((r) => setTimeout(r, 5000));
  const spikes = measure('qos');
  for (let probe = 0; probe < qosProbes; probe++) {
    const now = Date.now();
    const batch = Array.from({ length: sessions }, (_, s) => qosEvent(probe, s, 'heartbeat', now));
    for (let s = 0; s < sessions / 2; s++) batch.push(qosEvent(probe, s, 'error', now, true));
    spikes.posted.set(`Bench ${probe}`, now);
    await ingest(keyOf(probe), batch);
    await new Promise((r) => setTimeout(r, 250));
  }
  await report(
    `QoS detection to delivery (ingest POST → error spike's webhook, ${config.shards} shards)`,
    spikes.delays,
    qosProbes,
    'alerts',
    15_000,
  );
} finally {
  await roles?.stop();
  await service?.stop();
  child.send('exit');
  await bus.close();
  await removeNamespace(natsUrl, prefix);
}
