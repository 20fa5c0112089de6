import { connect } from 'nats';
import t from 'tap';
import { LoginAttempts } from '../../src/api/login.js';
import { natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// The progressive delay of failed logins (docs/api.md "Login"), on a real KV bucket: it runs from the last failure's
// answer, so a check that took long does not use the delay up before its client hears of it.

const prefix = uniquePrefix();
const nc = await connect({ servers: natsUrl });
const attempts = new LoginAttempts(await nc.jetstream().views.kv(`${prefix}_logins`));
t.teardown(async () => {
  await nc.close();
  await removeNamespace(prefix);
});

const key = 'c.one-account-one-network';
const delayed = [[key, { free: 5 }]] as const;
const t0 = Date.now();

t.test('past 5 failures, each attempt waits after the answer to the one before', async (t) => {
  for (let i = 0; i < 5; i++) t.equal(await attempts.reserve(delayed, t0 + i), 0, `failure ${i + 1} is free`);
  t.equal(await attempts.reserve(delayed, t0 + 5), 1, 'the 6th at once waits 1 s');
  t.equal(await attempts.reserve(delayed, t0 + 1004), 0, 'a second after the 5th, tried');
  // Its password check takes 3 s (a loaded server): the failure is answered at t0 + 4004.
  await attempts.settle(key, t0 + 1004, t0 + 4004);
  t.equal(
    await attempts.reserve(delayed, t0 + 3010),
    3,
    '2 s after that attempt came, but before its answer, the next still waits 2 s from the answer',
  );
  t.equal(await attempts.reserve(delayed, t0 + 6004), 0, '2 s after the answer, tried');
});

t.test('a success gives its attempt back; settling an attempt no longer there changes nothing', async (t) => {
  const other = [['c.another', { free: 1 }]] as const;
  t.equal(await attempts.reserve(other, t0), 0);
  await attempts.release(['c.another'], t0, t0 + 10);
  await attempts.settle('c.another', t0, t0 + 20);
  t.equal(await attempts.reserve(other, t0 + 30), 0, 'nothing counted against the next');
  t.equal(await attempts.reserve(other, t0 + 40), 1, 'which is counted');
});
