import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Transport, backoffCapMs, type QueuedEvent } from '../../sdk/web/src/transport.js';

// The SDK's sending against a real HTTP server whose answers the test scripts: what is accepted leaves the queue,
// a 503 is retried no sooner than its Retry-After with the same event ids, a refusal is not retried, a full queue
// drops heartbeats first, and the beacon takes everything when the page goes away.

interface Got {
  path: string;
  headers: IncomingMessage['headers'];
  body: { sent_at: string; events: QueuedEvent[] };
}

async function server(
  answers: Array<[number, Record<string, string>?, unknown?]>,
): Promise<{ url: string; got: Got[]; close(): Promise<void> }> {
  const got: Got[] = [];
  const s = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      got.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(raw) as Got['body'] });
      const [status, headers, answer] = answers.shift() ?? [200];
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(
        JSON.stringify(
          answer ??
            (status === 200 ? { accepted: 1, rejected: 0, queued: true, errors: [] } : { error: { code: 'x' } }),
        ),
      );
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    got,
    close: () => new Promise((r) => s.close(() => r())),
  };
}

function transport(
  url: string,
  clock: { now: number },
  extra: { maxQueue?: number; beacon?: (url: string, body: string) => boolean } = {},
) {
  let n = 0;
  const errors: string[] = [];
  const tr = new Transport({
    ingestUrl: `${url}/`,
    apiKey: 'dk_test',
    fetch,
    newId: () => `id-${++n}`,
    now: () => clock.now,
    random: () => 0.5,
    onError: (m) => errors.push(m),
    ...extra,
  });
  return { tr, errors };
}

const event = (type: string, i: number) => ({
  event_type: type,
  ts: new Date(Date.UTC(2026, 10, 26) + i).toISOString(),
  session_id: 's1',
});

t.test('accepted events leave the queue; a 503 waits out its Retry-After and resends the same ids', async (t) => {
  const srv = await server([[503, { 'retry-after': '30' }], [200]]);
  t.teardown(() => srv.close());
  const clock = { now: Date.UTC(2026, 10, 26) };
  const { tr } = transport(srv.url, clock);
  tr.add(event('play_start', 1));
  tr.add(event('first_frame', 2));
  await tr.flush();
  t.equal(srv.got.length, 1);
  t.match(srv.got[0]!, {
    path: '/v1/ingest/events',
    headers: { 'x-api-key': 'dk_test', 'content-type': 'text/plain' },
  });
  t.equal(tr.pending, 2, 'kept after a 503');
  clock.now += 29_000;
  await tr.flush();
  t.equal(srv.got.length, 1, 'not before Retry-After');
  clock.now += 1_000;
  await tr.flush();
  t.equal(srv.got.length, 2);
  t.same(
    srv.got[1]!.body.events.map((e) => e.event_id),
    srv.got[0]!.body.events.map((e) => e.event_id),
    'the same event ids: the server counts them once',
  );
  t.not(srv.got[1]!.body.sent_at, srv.got[0]!.body.sent_at, 'sent_at is the time of each attempt, for skew correction');
  t.equal(tr.pending, 0);
});

t.test('of a 200, events the bus did not take go again after a backoff; invalid ones are dropped', async (t) => {
  // Ingest's answer when NATS acknowledged some of a batch's events (docs/ingest.md): 200, each other one in errors.
  const partly = {
    accepted: 1,
    rejected: 2,
    queued: true,
    errors: [
      { index: 1, code: 'ingest_degraded', message: 'The event bus did not acknowledge this event; send it again' },
      { index: 2, code: 'validation_failed', message: 'ts: must be a date-time' },
    ],
  };
  const srv = await server([[200, {}, partly], [200]]);
  t.teardown(() => srv.close());
  const clock = { now: Date.UTC(2026, 10, 26) };
  const { tr, errors } = transport(srv.url, clock);
  for (const [i, type] of ['play_start', 'first_frame', 'heartbeat'].entries()) tr.add(event(type, i));
  await tr.flush();
  t.equal(tr.pending, 1, 'the one the bus did not take is kept');
  t.match(errors, [/ingest rejected 1 of 3 events/], 'the invalid one is said, and dropped');
  await tr.flush();
  t.equal(srv.got.length, 1, 'not again at once: a backoff');
  clock.now += backoffCapMs;
  await tr.flush();
  t.same(
    srv.got[1]!.body.events.map((e) => [e.event_type, e.event_id]),
    [['first_frame', srv.got[0]!.body.events[1]!.event_id]],
    'sent again with its id',
  );
  t.equal(tr.pending, 0);
});

t.test('a refused batch is dropped and said; a network failure backs off with jitter up to the cap', async (t) => {
  const srv = await server([[400]]);
  const clock = { now: Date.UTC(2026, 10, 26) };
  const { tr, errors } = transport(srv.url, clock);
  tr.add(event('heartbeat', 1));
  await tr.flush();
  t.equal(tr.pending, 0);
  t.match(errors, [/ingest refused 1 events: 400/]);
  await srv.close();
  tr.add(event('heartbeat', 2));
  let waits = 0;
  for (let attempt = 1; attempt <= 10; attempt++) {
    const before = clock.now;
    await tr.flush();
    // With random() = 0.5, each wait is half of min(cap, 1 s × 2^attempt): find it by stepping the clock.
    let waited = 0;
    while (waited <= backoffCapMs) {
      clock.now += 250;
      waited += 250;
      const sent = tr.pending;
      await tr.flush();
      if (tr.pending !== sent || waited >= Math.min(backoffCapMs, 1000 * 2 ** (attempt + 1)) / 2) break;
    }
    waits = Math.max(waits, clock.now - before);
  }
  t.ok(waits <= backoffCapMs / 2 + 1000, `the longest wait, ${waits} ms, stays under the cap`);
  t.equal(tr.pending, 1, 'nothing lost while the network is away');
});

t.test('a full queue drops heartbeats first; the beacon takes the rest in batches', async (t) => {
  const beacons: Array<[string, string]> = [];
  const clock = { now: Date.UTC(2026, 10, 26) };
  const { tr, errors } = transport('http://127.0.0.1:9', clock, {
    maxQueue: 150,
    beacon: (url, body) => (beacons.push([url, body]), true),
  });
  tr.add(event('play_start', 0));
  for (let i = 1; i <= 200; i++) tr.add(event(i % 50 === 0 ? 'rebuffer_start' : 'heartbeat', i));
  t.equal(tr.pending, 150);
  t.equal(errors.length, 51);
  tr.beacon();
  t.equal(tr.pending, 0);
  t.equal(beacons.length, 2, '150 events in batches of 100');
  t.equal(beacons[0]![0], 'http://127.0.0.1:9/v1/ingest/beacon?api_key=dk_test');
  const sent = beacons.flatMap(([, body]) => (JSON.parse(body) as Got['body']).events.map((e) => e.event_type));
  t.equal(sent[0], 'play_start', 'the start is kept');
  t.equal(sent.filter((x) => x === 'rebuffer_start').length, 4, 'every non-heartbeat is kept');
});
