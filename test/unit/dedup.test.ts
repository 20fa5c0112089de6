import { Packr } from 'msgpackr';
import t from 'tap';
import { DedupWindow, dedupWindowMs, type SavedDedup } from '../../src/aggregate/dedup.js';
import { Rng } from '../../bench/simulator/rng.js';

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
  copy.load(w.save(), t0 + dedupWindowMs + 500);
  t.equal(copy.size, 1);
  t.equal(copy.firstSeen('a', 'new', t0 + dedupWindowMs + 500), false);
});

const uuid = (rng: Rng): string =>
  Array.from({ length: 32 }, () => Math.floor(rng.next() * 16).toString(16))
    .join('')
    .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');

/** What the window must answer: the Map it replaced, keyed by string, expired from the oldest. */
class Model {
  readonly seen = new Map<string, number>();
  firstSeen(tenant: string, id: string, at: number): boolean {
    const key = `${tenant}\u0000${id}`;
    const was = this.seen.get(key);
    if (was !== undefined && at - was <= dedupWindowMs) return false;
    this.seen.delete(key);
    this.seen.set(key, at);
    return true;
  }
  expire(now: number): void {
    for (const [key, at] of this.seen) {
      if (now - at <= dedupWindowMs) break;
      this.seen.delete(key);
    }
  }
}

t.test(
  'UUID ids: the same answers as a Map of strings through growth, re-use after the window, expiry and checkpoints',
  async (t) => {
    const rng = new Rng(11);
    let w = new DedupWindow();
    const model = new Model();
    const ids: Array<[string, string]> = [];
    let now = Date.UTC(2026, 10, 21);
    let differ = 0;
    const codec = new Packr({ useRecords: false });
    for (let step = 0; step < 60_000; step++) {
      now += Math.floor(rng.next() * 4_000);
      const r = rng.next();
      // Mostly new ids, some resent soon, some resent a day or more later; a few ids that are not UUIDs.
      const pick: [string, string] =
        r < 0.6 || ids.length === 0
          ? [rng.next() < 0.5 ? 'acme' : 'demo', rng.next() < 0.02 ? `plain-${step}` : uuid(rng)]
          : ids[Math.floor(rng.next() * ids.length)]!;
      if (r < 0.6) ids.push(pick);
      // A UUID in upper case is the same id (ingest sends lower case); any other id is its exact string.
      const sent = rng.next() < 0.1 ? pick[1].toUpperCase() : pick[1];
      const modelId = /^[0-9a-f-]{36}$/i.test(sent) ? sent.toLowerCase() : sent;
      if (w.firstSeen(pick[0], sent, now) !== model.firstSeen(pick[0], modelId, now)) differ++;
      if (step % 97 === 0) {
        w.expire(now);
        model.expire(now);
        if (w.size !== model.seen.size) differ++;
      }
      if (step % 10_007 === 0) {
        // Through a checkpoint's bytes, as the shard writes and reads them.
        const copy = new DedupWindow();
        copy.load(codec.unpack(codec.pack(w.save())) as SavedDedup, now);
        w = copy;
      }
      // Sometimes a day passes, and most ids expire at once.
      if (rng.next() < 0.0001) now += dedupWindowMs;
    }
    t.equal(differ, 0, 'every answer and size as the model');
    t.ok(model.seen.size > 1_000, `${model.seen.size} ids remembered at the end`);
  },
);
