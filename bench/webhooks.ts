// Webhook delivery benchmark (npm run bench:webhooks). Two figures, each with the machine:
//
// 1. Throughput: N events for one tenant are published to the webhook events stream of a fresh namespace, then the
//    webhooks role (WebhookService, as `darshak start --role webhooks` runs it, in this process) fans them out to one
//    endpoint and delivers them: signed, through the SSRF guard, each attempt logged. The receiver is a node:http
//    server in a child process (answers 200). Deliveries/s = N / time from the service's start to the last log entry.
// 2. Latency: one event every 20 ms; the time from publishWebhookEvent's call (what the alerts role does when an alert
//    fires) to the receiver having the request. p50/p99. Detection itself is the alerts role's and not measured here.
//
//   npm run bench:webhooks [-- --events 20000 --probes 200 --concurrency 64]

import { spawn, type ChildProcess } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { Bus } from '../src/bus/bus.js';
import { removeNamespace } from '../src/bus/namespace.js';
import { ControlPlane } from '../src/control/control-plane.js';
import { createLogger } from '../src/log.js';
import { newEventId, publishWebhookEvent } from '../src/webhooks/events.js';
import { Mailer } from '../src/webhooks/mailer.js';
import { WebhookService } from '../src/webhooks/service.js';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '20000' },
    probes: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '64' },
  },
});
const events = Number(args.events);
const probes = Number(args.probes);
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = createLogger('warn');

console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${process.platform}`);

// The receiver: counts requests, reports probes (path /probe) at once over IPC with their arrival time.
const receiverCode = `
const http = require('node:http');
let count = 0;
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    count++;
    if (req.url === '/probe') process.send({ probe: req.headers['x-service-delivery'], at: Date.now() });
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

const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;

const prefix = `bench${Date.now().toString(36)}`;
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
const { child, port } = await startReceiver();
let service: WebhookService | undefined;
try {
  const control = await ControlPlane.open(bus);
  await control.createTenant({ slug: 'bench', name: 'Bench', plan: 'enterprise', ownerEmail: 'owner@bench.test', ownerPassword: 'correct horse battery' });
  const ep = await control.webhooks.create('bench', { url: `http://127.0.0.1:${port}/hook`, categories: ['qos.rebuffer_spike'] });
  const data = { severity: 'warning', region: 'Maharashtra', pop: 'bom1', current_rate: 6.5, baseline_rate: 2, affected_sessions: 40 };
  const event = () => ({ id: newEventId(), type: 'qos.rebuffer_spike', created_at: new Date().toISOString(), tenant_slug: 'bench', data });
  for (let i = 0; i < events; i += 500) await Promise.all(Array.from({ length: Math.min(500, events - i) }, () => publishWebhookEvent(bus, event())));

  const mailer = new Mailer({ smtp_url: '', data_dir: '/tmp', public_base_url: 'http://127.0.0.1:8080' });
  const started = performance.now();
  service = await WebhookService.start(bus, control, mailer, log, { allowHosts: ['127.0.0.0/8'], dashboardUrl: 'http://127.0.0.1:8080', concurrency: Number(args.concurrency) });
  const logged = async (): Promise<number> => (await bus.jsm.streams.info(bus.names.webhookLogStream)).state.messages;
  // The log keeps 200 per endpoint, so count what the log stream has ever taken (its last sequence).
  const lastLogSeq = async (): Promise<number> => (await bus.jsm.streams.info(bus.names.webhookLogStream)).state.last_seq;
  while ((await lastLogSeq()) < events) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  const got = await received(child);
  console.log(`throughput: ${events} events → ${got} deliveries received, ${await lastLogSeq()} attempts logged (${await logged()} kept) in ${seconds.toFixed(2)} s = ${Math.round(events / seconds)} deliveries/s (concurrency ${args.concurrency})`);

  // Latency: probes to a second endpoint.
  await control.webhooks.update('bench', ep.id, { categories: ['billing.churn_spike'] });
  await control.webhooks.create('bench', { url: `http://127.0.0.1:${port}/probe`, categories: ['qos.error_spike'] });
  await new Promise((r) => setTimeout(r, 300));
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  const { deliveryId } = await import('../src/webhooks/events.js');
  const probeEndpoint = (await control.webhooks.list('bench')).find((e) => e.url.endsWith('/probe'))!;
  child.on('message', (m: { probe?: string; at?: number }) => {
    const t0 = m.probe ? sentAt.get(m.probe) : undefined;
    if (t0 !== undefined && m.at !== undefined) latencies.push(m.at - t0);
  });
  for (let i = 0; i < probes; i++) {
    const e = { ...event(), type: 'qos.error_spike' };
    sentAt.set(deliveryId(e.id, probeEndpoint.id), Date.now());
    await publishWebhookEvent(bus, e);
    await new Promise((r) => setTimeout(r, 20));
  }
  const deadline = Date.now() + 10_000;
  while (latencies.length < probes && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  latencies.sort((a, b) => a - b);
  console.log(`latency (publishWebhookEvent → received), ${latencies.length}/${probes} probes: p50 ${pct(latencies, 50)} ms, p99 ${pct(latencies, 99)} ms, max ${latencies.at(-1)} ms`);
} finally {
  await service?.stop();
  child.send('exit');
  await bus.close();
  await removeNamespace(natsUrl, prefix);
}
