import t from 'tap';
import { deliveryId } from '../../src/webhooks/events.js';
import { appendLog, readLog } from '../../src/webhooks/log.js';
import { Mailer } from '../../src/webhooks/mailer.js';
import { WebhookService, type DeliveryMessage } from '../../src/webhooks/service.js';
import { createLogger } from '../../src/log.js';
import { eventually } from '../helpers/env.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { startHarness } from '../helpers/webhooks.js';

// A webhooks process killed after an attempt was made and logged, before its acknowledgement: the delivery comes
// again, and must not reach the receiver a second time (the chaos soak saw one delivery sent again after a 200).

const receiver = await Receiver.start();
t.teardown(() => receiver.close());
const h = await startHarness({ timeoutMs: 2000 });
t.teardown(() => h.stop());

t.test('a delivery sent again whose attempt is logged is acknowledged, not sent; one not logged is sent', async (t) => {
  const endpoint = await h.control.webhooks.create('acme', { url: `${receiver.url}/hook`, categories: ['qos.rebuffer_spike'] });
  // The role is down while its deliveries are taken once and not acknowledged, as by the process that died.
  await h.service.stop();
  const message = (event: string): DeliveryMessage => ({ delivery_id: deliveryId(event, endpoint.id), endpoint_id: endpoint.id, tenant: 'acme', event_id: event, type: 'qos.rebuffer_spike', body: JSON.stringify({ id: event }), attempt: 1, not_before: null });
  const made = message('evt_made');
  const notMade = message('evt_not_made');
  for (const m of [made, notMade]) await h.bus.js.publish(h.bus.names.webhookDeliverySubject('new', endpoint.id), JSON.stringify(m));
  // The dead process's attempt of the first: made, answered 200, logged; its acknowledgement never sent.
  await appendLog(h.bus, endpoint.id, { id: 'att_dead', delivery_id: made.delivery_id, event_id: made.event_id, type: made.type, attempt: 1, status: 'succeeded', response_code: 200, latency_ms: 5, error: null, request_body: made.body, created_at: new Date().toISOString(), next_attempt_at: null });
  const consumer = await h.bus.js.consumers.get(h.bus.names.webhookDeliveriesStream, 'webhooks-new');
  let taken = 0;
  for await (const m of await consumer.fetch({ max_messages: 2, expires: 3000 })) {
    taken++;
    m.nak();
  }
  t.equal(taken, 2, 'both taken once and given back: they come again as redelivered');

  const mailer = new Mailer({ smtp_url: '', data_dir: t.testdir(), public_base_url: 'http://dashboard.acme.test' });
  const again = await WebhookService.start(h.bus, h.control, mailer, createLogger('error'), { allowHosts: ['127.0.0.0/8'], dashboardUrl: 'http://dashboard.acme.test', timeoutMs: 2000 });
  t.teardown(() => again.stop());
  const arrived = (id: string) => receiver.received.filter((r) => r.headers['x-service-delivery'] === id).length;
  t.not(await eventually(async () => arrived(notMade.delivery_id) === 1, 20_000, 100), -1, 'the delivery not attempted before is sent');
  t.not(await eventually(async () => (await h.bus.jsm.consumers.info(h.bus.names.webhookDeliveriesStream, 'webhooks-new')).num_ack_pending === 0, 20_000, 100), -1, 'both are acknowledged');
  t.equal(arrived(made.delivery_id), 0, 'the one attempted before is not sent again');
  t.equal((await readLog(h.bus, endpoint.id)).filter((a) => a.delivery_id === made.delivery_id).length, 1, 'nor logged again');
});
