import t from 'tap';
import { Bus } from '../../src/bus/bus.js';
import { ControlPlane } from '../../src/control/control-plane.js';
import { createLogger } from '../../src/log.js';
import { ensureWebhookStreams } from '../../src/contracts/webhook-streams.js';
import { ensureWebhookConsumers, retryMaxAckPending } from '../../src/webhooks/consumers.js';
import { natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// Endpoint records in NATS KV: compare-and-set updates, so concurrent writers never lose a change.

const prefix = uniquePrefix();
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, createLogger('error'));
t.teardown(async () => {
  await bus.close();
  await removeNamespace(prefix);
});
const control = await ControlPlane.open(bus);
await control.createTenant({
  slug: 'acme',
  name: 'Acme',
  plan: 'pro',
  ownerEmail: 'o@acme.test',
  ownerPassword: 'correct horse battery',
});

t.test('of many processes disabling an endpoint at once, exactly one did it (and sends the one e-mail)', async (t) => {
  const e = await control.webhooks.create('acme', { url: 'https://example.com/h', categories: ['qos.error_spike'] });
  const results = await Promise.all(Array.from({ length: 12 }, () => control.webhooks.disable('acme', e.id)));
  t.equal(results.filter((r) => r.changed).length, 1);
  t.equal((await control.webhooks.get('acme', e.id)).enabled, false);
  const again = await control.webhooks.update('acme', e.id, { enabled: true });
  t.match(again, { enabled: true, disabled_at: null });
});

t.test('concurrent patches both land', async (t) => {
  const e = await control.webhooks.create('acme', { url: 'https://example.com/h', categories: ['qos.error_spike'] });
  await Promise.all([
    control.webhooks.update('acme', e.id, { description: 'night shift' }),
    control.webhooks.update('acme', e.id, { categories: ['billing.churn_spike'] }),
  ]);
  t.match(await control.webhooks.get('acme', e.id), {
    description: 'night shift',
    categories: ['billing.churn_spike'],
  });
});

t.test('rotation keeps the old secret for 24 h; secrets are 32 random bytes', async (t) => {
  const e = await control.webhooks.create('acme', { url: 'https://example.com/h', categories: ['qos.error_spike'] });
  t.equal(Buffer.from(e.secret.slice('whsec_'.length), 'base64url').length, 32);
  const r = await control.webhooks.rotateSecret('acme', e.id);
  t.equal(r.previous_secret, e.secret);
  t.not(r.secret, e.secret);
  const hours = (Date.parse(r.previous_secret_until!) - Date.now()) / 3_600_000;
  t.ok(hours > 23.9 && hours <= 24, 'for 24 h');
  t.same(await control.users.ownerEmails('acme'), ['o@acme.test']);
});

t.test('another tenant sees nothing', async (t) => {
  await control.createTenant({
    slug: 'other',
    name: 'Other',
    plan: 'pro',
    ownerEmail: 'o@other.test',
    ownerPassword: 'correct horse battery',
  });
  const e = await control.webhooks.create('acme', { url: 'https://example.com/h', categories: ['qos.error_spike'] });
  await t.rejects(control.webhooks.get('other', e.id), { code: 'not_found' });
  await t.rejects(control.webhooks.delete('other', e.id), { code: 'not_found' });
  t.equal((await control.webhooks.list('other')).length, 0);
});

t.test('the webhook streams and consumers are ensured again at every start', async (t) => {
  for (let i = 0; i < 2; i++) {
    await ensureWebhookStreams(bus);
    await ensureWebhookConsumers(bus);
  }
  const retry = await bus.jsm.consumers.info(bus.names.webhookDeliveriesStream, 'webhooks-retry');
  t.equal(retry.config.max_ack_pending, retryMaxAckPending);
  const log = await bus.jsm.streams.info(bus.names.webhookLogStream);
  t.equal(log.config.max_msgs_per_subject, 200);
});
