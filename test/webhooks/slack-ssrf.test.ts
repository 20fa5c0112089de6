import t from 'tap';
import { deliveryId } from '../../src/contracts/webhook-events.js';
import { readLog } from '../../src/contracts/webhook-log.js';
import { eventually } from '../helpers/env.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { startHarness } from '../helpers/webhooks.js';

const receiver = await Receiver.start();
t.teardown(() => receiver.close());

t.test('Slack format: the message, one per second per URL, 404 not retried, 429 retried', async (t) => {
  const h = await startHarness({});
  t.teardown(() => h.stop());
  const ep = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/slack`,
    categories: ['qos.rebuffer_spike'],
    format: 'slack',
  });
  await eventually(async () => false, 200);
  const events = [
    await h.publish('qos.rebuffer_spike'),
    await h.publish('qos.rebuffer_spike'),
    await h.publish('qos.rebuffer_spike'),
  ];
  const mine = () => receiver.received.filter((r) => r.path === '/slack');
  t.not(await eventually(async () => mine().length === 3, 10_000), -1);
  const body = JSON.parse(mine()[0]!.body) as { text: string; blocks: unknown[] };
  t.match(body.text, /Rebuffering spike in Maharashtra \/ bom1: 6\.5 % \(baseline 2 %\)/);
  t.match(
    JSON.stringify(body.blocks),
    /<http:\/\/dashboard\.acme\.test\/alerts\|Open the alerts in Darshak>/,
    "a link to the dashboard's alerts page",
  );
  // An attempt is logged after its answer comes back, so the receiver may hold the third before the log does.
  t.not(await eventually(async () => (await readLog(h.bus, ep.id)).length === 3, 10_000), -1, 'three attempts logged');
  const log = await readLog(h.bus, ep.id);
  // The pacer gives each send a slot a second after the one before; a send's time in the log is read once its slot has
  // come, so a busy event loop can log one late and the next gap short by as much (a suite run logged 1017 then 988).
  // Unpaced, the three go out within milliseconds: 950 ms tells the two apart with room for the loop's lag.
  const times = log.map((a) => Date.parse(a.created_at)).sort((a, b) => a - b);
  t.ok(
    times.length === 3 && times[1]! - times[0]! >= 950 && times[2]! - times[1]! >= 950 && times[2]! - times[0]! >= 1950,
    `sent a second apart: ${times[1]! - times[0]!}, ${times[2]! - times[1]!} ms`,
  );
  t.equal(
    log.find((a) => a.delivery_id === deliveryId(events[0]!, ep.id))?.request_body,
    mine().find((r) => r.headers['x-service-delivery'] === deliveryId(events[0]!, ep.id))?.body,
    'the log keeps the exact body sent',
  );

  receiver.respond = (r) => ({
    status: r.path === '/gone' ? 404 : r.path === '/busy' ? 429 : 200,
    headers: { 'Retry-After': '1' },
  });
  const gone = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/gone`,
    categories: ['billing.churn_spike'],
    format: 'slack',
  });
  const busy = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/busy`,
    categories: ['billing.churn_spike'],
    format: 'slack',
  });
  await eventually(async () => false, 200);
  await h.publish('billing.churn_spike', { severity: 'critical', cancellations: 40, baseline: 10, window_minutes: 60 });
  t.not(
    await eventually(
      async () => (await readLog(h.bus, gone.id)).length === 1 && (await readLog(h.bus, busy.id)).length === 1,
      10_000,
    ),
    -1,
  );
  t.match(
    (await readLog(h.bus, gone.id))[0],
    { status: 'failed', response_code: 404, next_attempt_at: null },
    'Slack 404: not retried',
  );
  const b = (await readLog(h.bus, busy.id))[0]!;
  t.equal(b.response_code, 429);
  t.ok(Date.parse(b.next_attempt_at!) - Date.parse(b.created_at) >= 30_000, 'Slack 429: retried on the schedule');
});

t.test('without an exemption, the SSRF guard refuses the endpoint: logged, retried, nothing sent', async (t) => {
  const h = await startHarness({ allowHosts: [] });
  t.teardown(() => h.stop());
  const before = receiver.received.length;
  const eps = await Promise.all(
    [
      `${receiver.url}/ssrf`,
      `http://localhost:${new URL(receiver.url).port}/ssrf`,
      'http://10.0.0.1/hook',
      'http://169.254.169.254/latest/meta-data/',
    ].map((url) => h.control.webhooks.create('acme', { url, categories: ['ingest.quota_exceeded'] })),
  );
  await eventually(async () => false, 200);
  await h.publish('ingest.quota_exceeded', {
    severity: 'critical',
    used: 1_000_001,
    quota: 1_000_000,
    period: '2026-11',
  });
  for (const ep of eps) {
    t.not(await eventually(async () => (await readLog(h.bus, ep.id)).length === 1, 10_000), -1, ep.url);
    const a = (await readLog(h.bus, ep.id))[0]!;
    t.match(a, { status: 'failed', response_code: null, error: /SSRF guard/ }, `${ep.url} refused`);
    t.type(a.next_attempt_at, 'string', 'and retried later (DNS or the allow list may change)');
  }
  t.equal(receiver.received.length, before, 'nothing reached the receiver');
});

t.test('deliveries held for a disabled endpoint are dropped when it is deleted', async (t) => {
  const h = await startHarness({ releaseIntervalMs: 100 });
  t.teardown(() => h.stop());
  const ep = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/held`,
    categories: ['content.new_release_detected'],
  });
  await h.control.webhooks.update('acme', ep.id, { enabled: false });
  await eventually(async () => false, 200);
  await h.publish('content.new_release_detected', {
    severity: 'warning',
    content_id: 'c1',
    title: 'New',
    content_type: 'movie',
  });
  const held = async (): Promise<number> => {
    const info = await h.bus.jsm.streams.info(h.bus.names.webhookHeldStream, {
      subjects_filter: h.bus.names.webhookHeldSubject(ep.id),
    });
    return info.state.subjects?.[h.bus.names.webhookHeldSubject(ep.id)] ?? 0;
  };
  t.not(await eventually(async () => (await held()) === 1, 10_000), -1, 'held');
  t.equal(receiver.received.filter((r) => r.path === '/held').length, 0);
  await h.control.webhooks.delete('acme', ep.id);
  t.not(await eventually(async () => (await held()) === 0, 10_000), -1, 'dropped with the endpoint');
  t.equal(receiver.received.filter((r) => r.path === '/held').length, 0, 'never sent');
});

t.test("a suspended tenant's deliveries are held, and released when it is made active", async (t) => {
  const h = await startHarness({ releaseIntervalMs: 100 });
  t.teardown(() => h.stop());
  const ep = await h.control.webhooks.create('acme', {
    url: `${receiver.url}/suspended`,
    categories: ['content.new_release_detected'],
  });
  await h.control.updateTenant('acme', { status: 'inactive' });
  await eventually(async () => false, 300);
  await h.publish('content.new_release_detected', {
    severity: 'info',
    content_id: 'c9',
    title: 'New',
    content_type: 'movie',
  });
  const mine = () => receiver.received.filter((r) => r.path === '/suspended');
  const held = async (): Promise<number> => {
    const info = await h.bus.jsm.streams.info(h.bus.names.webhookHeldStream, {
      subjects_filter: h.bus.names.webhookHeldSubject(ep.id),
    });
    return info.state.subjects?.[h.bus.names.webhookHeldSubject(ep.id)] ?? 0;
  };
  t.not(await eventually(async () => (await held()) === 1, 10_000), -1, 'held while the tenant is inactive');
  await eventually(async () => false, 500);
  t.equal(mine().length, 0, 'nothing sent');
  await h.control.updateTenant('acme', { status: 'active' });
  t.not(await eventually(async () => mine().length === 1, 10_000), -1, 'sent once it is active again');
});
