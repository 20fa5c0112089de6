import t from 'tap';
import { DedupWindow, dedupWindowMs } from '../../src/aggregate/dedup.js';

t.test('an id is a duplicate for 24 h after its first passage, per tenant', async (t) => {
  const w = new DedupWindow();
  const t0 = Date.UTC(2026, 10, 21);
  t.equal(w.has('a', 'x', t0), false);
  w.remember('a', 'x', t0);
  t.equal(w.has('a', 'x', t0 + dedupWindowMs), true, 'exactly 24 h later: still a duplicate');
  t.equal(w.has('a', 'x', t0 + dedupWindowMs + 1), false, 'after 24 h: new again');
  t.equal(w.has('b', 'x', t0 + 1), false, 'another tenant’s id is another id');
});

t.test('expiry forgets from the oldest, and a re-remembered id moves to the back', async (t) => {
  const w = new DedupWindow();
  const t0 = Date.UTC(2026, 10, 21);
  w.remember('a', 'old', t0);
  w.remember('a', 'mid', t0 + 1000);
  w.remember('a', 'new', t0 + dedupWindowMs);
  w.expire(t0 + dedupWindowMs + 500);
  t.equal(w.size, 2, 'only "old" is gone');
  t.equal(w.has('a', 'mid', t0 + dedupWindowMs + 500), true);
  w.remember('a', 'mid', t0 + dedupWindowMs + 600);
  w.expire(t0 + 2 * dedupWindowMs + 1);
  t.equal(w.size, 1, '"new" expired; "mid", remembered again later, stays');
});
