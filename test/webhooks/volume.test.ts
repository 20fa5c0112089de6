import t from 'tap';
import { deliveryId } from '../../src/contracts/webhook-events.js';
import { readLog } from '../../src/contracts/webhook-log.js';
import { newMaxAckPending } from '../../src/webhooks/consumers.js';
import { eventually } from '../helpers/env.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { startHarness } from '../helpers/webhooks.js';

// Volume on real JetStream with the real clock: parked retries must not stop new deliveries, and the log keeps 200.

const receiver = await Receiver.start();
t.teardown(() => receiver.close());
receiver.respond = (r) => ({ status: r.path.startsWith('/down') ? 500 : 200 });
const h = await startHarness({});
t.teardown(() => h.stop());

t.test('2,000 parked retries while new deliveries still flow', async (t) => {
  const parked = 2000;
  t.ok(parked > newMaxAckPending, 'more than the new-delivery consumer would hold pending');
  const down = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/down`,
    categories: ['qos.error_spike'],
  });
  const up = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/up`,
    categories: ['billing.payment_failure'],
  });
  await eventually(async () => false, 200); // the role's watched copy of the endpoints catches up
  for (let i = 0; i < parked; i += 100)
    await Promise.all(Array.from({ length: 100 }, () => h.publish('qos.error_spike')));
  const retry = async () => h.bus.jsm.consumers.info(h.bus.names.webhookDeliveriesStream, 'webhooks-retry');
  t.not(
    await eventually(async () => (await retry()).num_ack_pending >= parked, 60_000, 200),
    -1,
    `${parked} retries parked (pending on the retry consumer)`,
  );
  const downHits = receiver.received.filter((r) => r.path === '/down').length;
  t.equal(downHits, parked, 'each failed once; none retried before its 30 s');
  const fresh = await Promise.all(Array.from({ length: 50 }, () => h.publish('billing.payment_failure')));
  const started = Date.now();
  const ids = new Set(fresh.map((e) => deliveryId(e, up.id)));
  const took = await eventually(
    async () =>
      receiver.received.filter((r) => ids.has(String(r.headers['x-service-delivery']))).length === fresh.length,
    10_000,
  );
  t.not(took, -1, 'every new delivery arrived');
  t.ok(Date.now() - started < 10_000, `in ${Date.now() - started} ms`);
  t.ok((await retry()).num_ack_pending >= parked, 'the retries are still parked');
  t.equal((await readLog(h.bus, down.id)).length, 200, 'the log of the failing endpoint holds its last 200 attempts');
});

t.test('the 201st attempt evicts the oldest log entry', async (t) => {
  const ep = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/log`,
    categories: ['content.completion_drop'],
  });
  await eventually(async () => false, 200);
  const events: string[] = [];
  // One at a time, so the log's order is the order of publication.
  for (let i = 0; i < 201; i++) {
    events.push(
      await h.publish('content.completion_drop', {
        severity: 'warning',
        content_id: `c${i}`,
        title: 't',
        current_pct: 40,
        baseline_pct: 70,
      }),
    );
    const id = deliveryId(events[i]!, ep.id);
    await eventually(async () => receiver.received.some((r) => r.headers['x-service-delivery'] === id), 5000, 5);
  }
  const last = deliveryId(events[200]!, ep.id);
  t.not(await eventually(async () => (await readLog(h.bus, ep.id))[0]?.delivery_id === last, 5000), -1);
  const log = await readLog(h.bus, ep.id);
  t.equal(log.length, 200);
  t.notOk(
    log.some((a) => a.delivery_id === deliveryId(events[0]!, ep.id)),
    'the first attempt is gone',
  );
  t.equal(log.at(-1)!.delivery_id, deliveryId(events[1]!, ep.id), 'the second is now the oldest');
  t.ok(log.every((a) => a.status === 'succeeded'));
});
