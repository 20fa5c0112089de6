import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { freePort } from '../../bench/host.js';
import { PrivateNats } from '../../bench/private-nats.js';
import { deliveryId } from '../../src/contracts/webhook-events.js';
import { AttemptsMade } from '../../src/webhooks/attempts-made.js';
import { appendLog, readLog, type AttemptLog } from '../../src/contracts/webhook-log.js';
import { Mailer } from '../../src/webhooks/mailer.js';
import type { DeliveryMessage } from '../../src/contracts/webhook-streams.js';
import { WebhookService } from '../../src/webhooks/service.js';
import { createLogger } from '../../src/log.js';
import { eventually } from '../helpers/env.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { startHarness } from '../helpers/webhooks.js';

// A webhooks process killed after an attempt was made and logged, before its acknowledgement: the delivery comes
// again, and must not reach the receiver a second time (the chaos soak saw one delivery sent again after a 200), whether
// JetStream marks it as redelivered or sends it as new (a NATS server that lost the consumer's state).

const receiver = await Receiver.start();
t.teardown(() => receiver.close());
const h = await startHarness({ timeoutMs: 2000 });
t.teardown(() => h.stop());

let running: WebhookService | null = h.service;

for (const lost of ['the acknowledgement', 'the consumer\u2019s state'] as const) {
  t.test(
    `a delivery that comes again after its attempt was made (${lost} lost) is acknowledged and logged once, not sent; one not made is sent`,
    async (t) => {
      const endpoint = await h.control.webhooks.create('acme', {
        url: `${receiver.url}/hook`,
        categories: ['qos.rebuffer_spike'],
      });
      // The role is down while its deliveries are taken once and not acknowledged, as by the process that died.
      await running?.stop();
      running = null;
      const message = (event: string): DeliveryMessage => ({
        delivery_id: deliveryId(event, endpoint.id),
        endpoint_id: endpoint.id,
        tenant: 'acme',
        event_id: event,
        type: 'qos.rebuffer_spike',
        body: JSON.stringify({ id: event }),
        attempt: 1,
        not_before: null,
      });
      const [made, unlogged, notMade] = [message('evt_made'), message('evt_unlogged'), message('evt_not_made')];
      for (const m of [made, unlogged, notMade])
        await h.bus.js.publish(h.bus.names.webhookDeliverySubject('new', endpoint.id), JSON.stringify(m));
      // The dead process's attempts of the first two: made, answered 200 and recorded; the first logged, the second not
      // (killed in between); their acknowledgements never sent.
      const made200 = (m: DeliveryMessage, id: string): AttemptLog => ({
        id,
        delivery_id: m.delivery_id,
        event_id: m.event_id,
        type: m.type,
        attempt: 1,
        status: 'succeeded',
        response_code: 200,
        latency_ms: 5,
        error: null,
        request_body: m.body,
        created_at: new Date().toISOString(),
        next_attempt_at: null,
      });
      const attemptsMade = await AttemptsMade.open(h.bus);
      const n = h.bus.names;
      const consumer = await h.bus.js.consumers.get(n.webhookDeliveriesStream, 'webhooks-new');
      let taken = 0;
      for await (const m of await consumer.fetch({ max_messages: 3, expires: 3000 })) {
        taken++;
        const id = (JSON.parse(new TextDecoder().decode(m.data)) as DeliveryMessage).delivery_id;
        if (id === made.delivery_id) {
          await attemptsMade.record(m.seq, made200(made, `att_${endpoint.id}_${taken}`));
          await appendLog(h.bus, endpoint.id, made200(made, `att_${endpoint.id}_${taken}`));
        } else if (id === unlogged.delivery_id)
          await attemptsMade.record(m.seq, made200(unlogged, `att_${endpoint.id}_${taken}`));
        // Given back: it comes again marked as redelivered.
        if (lost === 'the acknowledgement') m.nak();
      }
      t.equal(taken, 3, 'all taken once');
      // A NATS server that loses the consumer's state sends every message again as new, unmarked.
      if (lost !== 'the acknowledgement') await h.bus.jsm.consumers.delete(n.webhookDeliveriesStream, 'webhooks-new');

      const mailer = new Mailer({ smtp_url: '', data_dir: t.testdir(), public_base_url: 'http://dashboard.acme.test' });
      running = await WebhookService.start(h.bus, h.control, mailer, createLogger('error'), {
        allowHosts: ['127.0.0.0/8'],
        dashboardUrl: 'http://dashboard.acme.test',
        timeoutMs: 2000,
      });
      const arrived = (id: string) => receiver.received.filter((r) => r.headers['x-service-delivery'] === id).length;
      t.not(
        await eventually(async () => arrived(notMade.delivery_id) === 1, 20_000, 100),
        -1,
        'the delivery not attempted before is sent',
      );
      const settled = async (): Promise<boolean> => {
        const info = await h.bus.jsm.consumers.info(n.webhookDeliveriesStream, 'webhooks-new');
        return info.num_pending + info.num_ack_pending === 0;
      };
      t.not(await eventually(settled, 20_000, 100), -1, 'all three are acknowledged');
      t.equal(arrived(made.delivery_id), 0, 'the one made before is not sent again');
      t.equal(arrived(unlogged.delivery_id), 0, 'nor the one made and not logged');
      const logged = await readLog(h.bus, endpoint.id);
      t.equal(logged.filter((a) => a.delivery_id === made.delivery_id).length, 1, 'the one logged is not logged again');
      t.equal(
        logged.filter((a) => a.delivery_id === unlogged.delivery_id).length,
        1,
        'the one not logged is logged now',
      );
    },
  );
}
t.teardown(() => running?.stop());

t.test('an attempt answered 200 while NATS is down is written down once NATS is back, not sent again', async (t) => {
  const nats = new PrivateNats(await freePort(), join(t.testdir(), 'js'));
  await nats.start();
  t.teardown(() => nats.kill());
  const own = await startHarness({ timeoutMs: 2000 }, '', nats.url);
  t.teardown(() => own.stop());
  const endpoint = await own.control.webhooks.create('acme', {
    url: `${receiver.url}/outage`,
    categories: ['qos.rebuffer_spike'],
  });
  // The server dies while the receiver answers, so every write after the attempt fails until it is back.
  receiver.respond = (r) => {
    if (r.path === '/outage') nats.killNow();
    return { status: 200 };
  };
  t.teardown(() => void (receiver.respond = () => ({ status: 200 })));
  const event = await own.publish('qos.rebuffer_spike');
  const id = deliveryId(event, endpoint.id);
  const arrived = () => receiver.received.filter((r) => r.headers['x-service-delivery'] === id).length;
  t.not(await eventually(async () => arrived() === 1, 10_000, 50), -1, 'attempted');
  await sleep(2000);
  await nats.start();
  const logged = async (): Promise<boolean> =>
    (await readLog(own.bus, endpoint.id).catch(() => [])).some((a) => a.delivery_id === id && a.status === 'succeeded');
  t.not(await eventually(logged, 20_000, 200), -1, 'its log entry written once NATS is back, within the ack wait');
  t.not(
    await eventually(
      async () =>
        (await own.bus.jsm.consumers.info(own.bus.names.webhookDeliveriesStream, 'webhooks-new')).num_ack_pending === 0,
      10_000,
      200,
    ),
    -1,
    'and its message acknowledged',
  );
  t.equal(arrived(), 1, 'sent once');
});
