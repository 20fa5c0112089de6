import t from 'tap';
import { DedupWindow, dedupWindowMs } from '../../src/aggregate/dedup.js';

t.test('an id is a duplicate for 24 h after its first passage, per tenant', async (t) => {
  const w = new DedupWindow();
  const t0 = Date.UTC(2026, 10, 21);
  t.equal(w.firstSeen('a', 'x', t0), true);
  t.equal(w.firstSeen('a', 'x', t0), false, 'seen again at once: a duplicate');
  t.equal(w.firstSeen('a', 'x', t0 + dedupWindowMs), false, 'exactly 24 h later: still a duplicate');
  t.equal(w.firstSeen('b', 'x', t0 + 1), true, 'another tenant’s id is another id');
  t.equal(w.firstSeen('a', 'x', t0 + dedupWindowMs + 1), true, 'after 24 h: new again');
  t.equal(w.firstSeen('a', 'x', t0 + 2 * dedupWindowMs + 1), false, 'and a duplicate for 24 h from then');
  t.equal(w.size, 2);
});

t.test('expiry forgets from the oldest, and an id new again moves to the back', async (t) => {
  const w = new DedupWindow();
  const t0 = Date.UTC(2026, 10, 21);
  w.firstSeen('a', 'old', t0);
  w.firstSeen('a', 'mid', t0 + 1000);
  w.firstSeen('a', 'new', t0 + dedupWindowMs);
  w.expire(t0 + dedupWindowMs + 500);
  t.equal(w.size, 2, 'only "old" is gone');
  t.equal(w.firstSeen('a', 'mid', t0 + dedupWindowMs + 500), false);
  // Past its window, before an expiry ran: new again, remembered from now.
  t.equal(w.firstSeen('a', 'mid', t0 + dedupWindowMs + 1001), true);
  w.expire(t0 + 2 * dedupWindowMs + 1);
  t.equal(w.size, 1, '"new" expired; "mid", new again later, stays');
});

t.test('a checkpoint’s entries load back, past the window dropped', async (t) => {
  const w = new DedupWindow();
  const t0 = Date.UTC(2026, 10, 21);
  w.firstSeen('a', 'old', t0);
  w.firstSeen('a', 'new', t0 + 1000);
  const copy = new DedupWindow();
  copy.load(w.entries(), t0 + dedupWindowMs + 500);
  t.equal(copy.size, 1);
  t.equal(copy.firstSeen('a', 'new', t0 + dedupWindowMs + 500), false);
});
