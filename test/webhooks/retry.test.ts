import t from 'tap';
import { deliveryId } from '../../src/contracts/webhook-events.js';
import { readLog, type AttemptLog } from '../../src/contracts/webhook-log.js';
import { maxAttempts, retryStepsMs } from '../../src/webhooks/schedule.js';
import { eventually } from '../helpers/env.js';
import { Receiver, type Answer } from '../../bench/webhook-receiver.js';
import { startHarness, startMailbox } from '../helpers/webhooks.js';

// The retry schedule on real JetStream with the service's clock injected: the test moves time, the service parks
// each retry (nak with a delay) until the clock reaches it.

const mailbox = await startMailbox();
t.teardown(() => mailbox.close());
const receiver = await Receiver.start();
t.teardown(() => receiver.close());
let now = Date.parse('2026-11-21T10:00:00.000Z');
const clock = { now: () => now };
// Jitter at its largest: still never more than 10 % late, never early.
const h = await startHarness(
  { clock, random: () => 0.999, maxParkMs: 40, releaseIntervalMs: 100, timeoutMs: 2000 },
  mailbox.url,
);
t.teardown(() => h.stop());
await h.control.users.add({
  tenant: 'acme',
  email: 'second-owner@acme.test',
  password: 'correct horse battery',
  role: 'owner',
});
await h.control.users.add({
  tenant: 'acme',
  email: 'viewer@acme.test',
  password: 'correct horse battery',
  role: 'viewer',
});

t.test(
  'seven attempts on the schedule, Retry-After honoured up to twice the step, then disabled with one e-mail; re-enable releases',
  async (t) => {
    const endpoint = await h.control.webhooks.create('acme', {
      url: `${receiver.url}/fail`,
      categories: ['qos.rebuffer_spike', 'billing.churn_spike'],
    });
    receiver.respond = (r): Answer => {
      const n = receiver.received.filter(
        (x) => x.headers['x-service-delivery'] === r.headers['x-service-delivery'],
      ).length;
      if (n === 3) return { status: 429, headers: { 'Retry-After': '3600' } }; // an hour asked, after a 10-minute step: capped at 20 min
      if (n === 4) return { status: 503, headers: { 'Retry-After': '5' } }; // less than the step: the step wins
      if (n === 5) return { status: 302, headers: { Location: `${receiver.url}/elsewhere` } }; // a redirect is a failure, not followed
      return { status: 500 };
    };
    // Two deliveries fail in step: both reach their last attempt together, and still only one e-mail goes.
    const events = [await h.publish('qos.rebuffer_spike'), await h.publish('qos.rebuffer_spike')];
    const ids = events.map((e) => deliveryId(e, endpoint.id));
    const arrivals = (id: string) => receiver.received.filter((r) => r.headers['x-service-delivery'] === id);
    const logOf = async (id: string): Promise<AttemptLog[]> =>
      (await readLog(h.bus, endpoint.id)).filter((a) => a.delivery_id === id).reverse();

    // The walk follows the first delivery; the second, in step with it, is made too until the endpoint is disabled. The
    // seventh attempt disables it, so only the delivery tried first gets one: the walk follows whichever that is.
    let walked = ids[0]!;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      const candidates = attempt === maxAttempts ? ids : [walked];
      const made = async (id: string): Promise<boolean> =>
        arrivals(id).length === attempt && (await logOf(id)).length === attempt;
      const got = await eventually(async () => {
        for (const id of candidates) {
          if (await made(id)) {
            walked = id;
            return true;
          }
        }
        return false;
      }, 10_000);
      t.not(got, -1, `attempt ${attempt} made and logged`);
      if (got === -1) return;
      const entries = await logOf(walked);
      const entry = entries[attempt - 1]!;
      t.equal(entry.created_at, new Date(now).toISOString(), `attempt ${attempt} at the injected time`);
      t.equal(arrivals(walked)[attempt - 1]!.headers['x-service-timestamp'], String(Math.floor(now / 1000)));
      t.equal(entry.status, 'failed');
      t.equal(entry.attempt, attempt);
      t.equal(arrivals(walked)[attempt - 1]!.path, '/fail', 'never a redirect target');
      if (attempt === maxAttempts) {
        t.equal(entry.next_attempt_at, null, 'no attempt after the seventh');
        break;
      }
      const step = retryStepsMs[attempt - 1]!;
      const delay = Date.parse(entry.next_attempt_at!) - now;
      if (attempt === 3) t.equal(delay, 2 * step, 'Retry-After past twice the step is capped at twice the step');
      else {
        t.ok(delay >= step, `retry ${attempt} never early (${delay} >= ${step})`);
        t.ok(delay <= step * 1.1, `retry ${attempt} at most 10 % late`);
      }
      // Just before its time nothing goes.
      now += delay - 1000;
      await new Promise((r) => setTimeout(r, 300));
      t.equal(arrivals(walked).length, attempt, `no attempt ${attempt + 1} a second early`);
      now += 1000;
    }
    t.not(
      await eventually(async () => !(await h.control.webhooks.get('acme', endpoint.id)).enabled, 5000),
      -1,
      'the endpoint is disabled',
    );
    t.not(await eventually(async () => mailbox.mails.length >= 1, 5000), -1, 'an e-mail');
    await new Promise((r) => setTimeout(r, 1000));
    t.equal(mailbox.mails.length, 1, 'exactly one e-mail');
    t.same(mailbox.mails[0]!.to.sort(), ['owner@acme.test', 'second-owner@acme.test'], 'to the owners, and only them');
    t.match(mailbox.mails[0]!.data, /disabled/);
    const other = ids.find((id) => id !== walked)!;
    t.ok(arrivals(other).length >= maxAttempts - 1, 'the other delivery went along until the endpoint was disabled');

    // While disabled, new deliveries wait.
    const before = arrivals(other).length;
    const later = await h.publish('billing.churn_spike', {
      severity: 'warning',
      cancellations: 30,
      baseline: 10,
      window_minutes: 60,
    });
    const laterId = deliveryId(later, endpoint.id);
    now += 48 * 3_600_000;
    await new Promise((r) => setTimeout(r, 800));
    t.equal(arrivals(laterId).length, 0, 'nothing goes to a disabled endpoint');
    t.equal(arrivals(walked).length, maxAttempts);
    t.equal(arrivals(other).length, before, 'held deliveries wait too');

    receiver.respond = () => ({ status: 204 });
    await h.control.webhooks.update('acme', endpoint.id, { enabled: true });
    for (const id of [...ids, laterId]) {
      t.not(
        await eventually(
          async () =>
            arrivals(id).some((r) => r.headers['x-service-delivery'] === id) &&
            (await logOf(id)).some((a) => a.status === 'succeeded'),
          10_000,
        ),
        -1,
        `${id} released and delivered`,
      );
    }
    t.equal(mailbox.mails.length, 1, 'still one e-mail');
    const released = (await logOf(walked)).at(-1)!;
    t.match(
      released,
      { status: 'succeeded', response_code: 204, attempt: 1 },
      'a released delivery starts its schedule again',
    );
  },
);
