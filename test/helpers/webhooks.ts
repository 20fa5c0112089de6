import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';
import { Bus } from '../../src/bus/bus.js';
import { ControlPlane } from '../../src/control/control-plane.js';
import { createLogger } from '../../src/log.js';
import { publishWebhookEvent, newEventId } from '../../src/contracts/webhook-events.js';
import { Mailer } from '../../src/webhooks/mailer.js';
import { WebhookService, type WebhookServiceOptions } from '../../src/webhooks/service.js';
import { natsUrl, removeNamespace, uniquePrefix } from './env.js';

export interface Mailbox {
  url: string;
  mails: Array<{ to: string[]; data: string }>;
  close(): Promise<void>;
}

/** A real SMTP server (the smtp-server package) that keeps every message it is given. */
export async function startMailbox(): Promise<Mailbox> {
  const mails: Mailbox['mails'] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), data: Buffer.concat(chunks).toString('utf8') });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as { port: number }).port;
  return { url: `smtp://127.0.0.1:${port}`, mails, close: () => new Promise<void>((r) => server.close(() => r())) };
}

export interface Harness {
  bus: Bus;
  control: ControlPlane;
  service: WebhookService;
  prefix: string;
  publish(type: string, data?: Record<string, unknown>): Promise<string>;
  stop(): Promise<void>;
}

/** The webhooks role on its own namespace (of the NATS at `url`), with a tenant `acme` (owner@acme.test), options as the test needs. */
export async function startHarness(
  options: Partial<WebhookServiceOptions>,
  smtpUrl = '',
  url = natsUrl,
): Promise<Harness> {
  const prefix = uniquePrefix();
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'error');
  const bus = await Bus.connect({ nats_url: url, nats_prefix: prefix }, log);
  const control = await ControlPlane.open(bus);
  await control.createTenant({
    slug: 'acme',
    name: 'Acme OTT',
    plan: 'pro',
    ownerEmail: 'owner@acme.test',
    ownerPassword: 'correct horse battery',
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-webhooks-'));
  const mailer = new Mailer({ smtp_url: smtpUrl, data_dir: dataDir, public_base_url: 'http://dashboard.acme.test' });
  const service = await WebhookService.start(bus, control, mailer, log, {
    allowHosts: ['127.0.0.0/8'],
    dashboardUrl: 'http://dashboard.acme.test',
    ...options,
  });
  return {
    bus,
    control,
    service,
    prefix,
    async publish(
      type,
      data = {
        severity: 'warning',
        region: 'Maharashtra',
        pop: 'bom1',
        current_rate: 6.5,
        baseline_rate: 2,
        affected_sessions: 40,
      },
    ) {
      const id = newEventId();
      await publishWebhookEvent(bus, { id, type, created_at: new Date().toISOString(), tenant_slug: 'acme', data });
      return id;
    },
    async stop() {
      await service.stop();
      mailer.close();
      await bus.close();
      await removeNamespace(prefix, url);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
