import t from 'tap';
import { billing } from './pipeline.js';
import { ev, feed } from '../../test/helpers/pipeline.js';

t.test('subscription and payment events, one row each; others none', async (t) => {
  const user = { session_id: undefined, user_id: 'u1' };
  const rows = feed(billing, [
    ev('subscription_started', 0, { ...user, properties: { amount_inr: 499, plan: 'premium' } }),
    ev('payment_succeeded', 1, { ...user, properties: { amount_inr: 499 } }),
    ev('subscription_cancelled', 2, user),
    ev('heartbeat', 3),
  ]).billing_events!;
  const got = rows.map(([k]) => JSON.stringify((JSON.parse(k) as unknown[]).slice(2))).sort();
  t.same(
    got,
    [
      ['u1', 'subscription_started', 499, 'premium'],
      ['u1', 'payment_succeeded', 499, ''],
      ['u1', 'subscription_cancelled', 0, ''],
    ]
      .map((r) => JSON.stringify(r))
      .sort(),
  );
});
