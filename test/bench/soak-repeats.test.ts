import t from 'tap';
import type { Fault } from '../../bench/soak/faults.js';
import { senderStopped, waitingWhy } from '../../bench/soak/run.js';

// The soak fails a run for a delivery sent again after its 200 unless a fault explains it: the webhooks process
// stopped before it could record the attempt (docs/webhooks.md, "Crash safety"). Nothing else may explain one.

const at = 1_000_000;
const repeat = { delivery: 'dlv_1', succeededAt: at, repeatedAt: at + 40_000 };
const applied = (f: Fault, appliedAt: number, skipped = false) => ({ ...f, appliedAt, skipped });

t.test('a kill -9 of the webhooks process between the 200 and the repeat explains it', async (t) => {
  t.match(
    senderStopped(repeat, [applied({ at: 0, kind: 'kill', role: 'webhooks', down: 1000 }, at + 50)]),
    /kill -9 of webhooks 0.1 s after its 200/,
  );
});

t.test('a SIGTERM explains it only with a nats-server down while the process had time to write', async (t) => {
  const term = applied({ at: 0, kind: 'term', role: 'webhooks', down: 1000 }, at + 2000);
  t.equal(senderStopped(repeat, [term]), null, 'a drained stop writes its attempts down');
  t.match(
    senderStopped(repeat, [term, applied({ at: 0, kind: 'nats', server: 0, down: 3000 }, at + 1000)]),
    /SIGTERM of webhooks 2.0 s after its 200, with a nats-server down/,
  );
  t.equal(
    senderStopped(repeat, [term, applied({ at: 0, kind: 'nats', server: 0, down: 3000 }, at + 20_000)]),
    null,
    'a server down after the stop is not it',
  );
});

t.test('a kill explains it only while the attempt could not be recorded yet', async (t) => {
  const kill = applied({ at: 0, kind: 'kill', role: 'webhooks', down: 1000 }, at + 8000);
  t.equal(senderStopped(repeat, [kill]), null, 'with NATS up, the attempt was recorded within a second of its 200');
  t.match(
    senderStopped(repeat, [kill, applied({ at: 0, kind: 'nats', server: 0, down: 4000 }, at - 500)]),
    /kill -9 of webhooks 8.0 s after its 200/,
    'with NATS down at the 200, not before it was back',
  );
});

t.test('nothing else explains it', async (t) => {
  for (const [why, faults] of [
    ['no fault', []],
    ['another role killed', [applied({ at: 0, kind: 'kill', role: 'alerts', down: 1000 }, at + 50)]],
    ['killed before the 200', [applied({ at: 0, kind: 'kill', role: 'webhooks', down: 1000 }, at - 50)]],
    ['killed after the repeat', [applied({ at: 0, kind: 'kill', role: 'webhooks', down: 1000 }, at + 50_000)]],
    ['a kill skipped (already down)', [applied({ at: 0, kind: 'kill', role: 'webhooks', down: 1000 }, at + 50, true)]],
    ['NATS down alone', [applied({ at: 0, kind: 'nats', server: 0, down: 5000 }, at + 50)]],
  ] as const) {
    t.equal(senderStopped(repeat, faults), null, why);
  }
});

t.test(
  'a delivery not received waits for its next attempt only when its last one failed and the next is still due',
  async (t) => {
    const failed = (attempt: number, next: number | null) => ({
      attempt,
      status: 'failed',
      created_at: new Date(at).toISOString(),
      next_attempt_at: next === null ? null : new Date(next).toISOString(),
      request_body: '{}',
    });
    t.match(
      waitingWhy('acme/final', [failed(4, at + 3_600_000), failed(3, at - 1)], at + 60_000),
      /attempt 4 failed at .*, the next is due at/,
    );
    t.equal(waitingWhy('acme/final', [], at), null, 'never attempted: lost');
    t.equal(
      waitingWhy('acme/final', [failed(2, at + 30_000)], at + 60_000),
      null,
      'its next attempt was due and did not come',
    );
    t.equal(waitingWhy('acme/final', [failed(7, null)], at), null, 'no next attempt: exhausted');
    t.equal(waitingWhy('acme/final', [{ ...failed(1, null), status: 'succeeded' }], at), null);
  },
);
