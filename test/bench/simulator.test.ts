import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Fleet, type Delivery, type FleetOptions } from '../../bench/simulator/fleet.js';
import { defaultIncidents, parseIncident } from '../../bench/simulator/incidents.js';
import { Oracle, type OracleEvent } from '../../bench/simulator/oracle.js';
import { Sender } from '../../bench/simulator/sender.js';

const minute = 60_000;
const startAt = Date.UTC(2026, 10, 1, 14, 0);

function play(o: Partial<FleetOptions> = {}): { deliveries: Delivery[]; events: OracleEvent[] } {
  const fleet = new Fleet({
    tenant: 'sim',
    viewers: 200,
    startAt,
    durationMs: 20 * minute,
    seed: 5,
    incidents: [],
    ...o,
  });
  const deliveries = fleet.advance(startAt + 30 * minute);
  t.ok(fleet.done, 'the whole match is simulated');
  return { deliveries, events: deliveries.flatMap((d) => d.events) };
}

t.test('the same seed gives the same events; another seed others', async (t) => {
  const a = play();
  t.same(play().events, a.events);
  t.not(JSON.stringify(play({ seed: 6 }).events.slice(0, 50)), JSON.stringify(a.events.slice(0, 50)));
});

t.test('sessions behave like players: a start, a heartbeat every 10 s, ordered events, the match curve', async (t) => {
  const { deliveries, events } = play();
  const sessions = new Map<string, OracleEvent[]>();
  for (const e of events) if (e.session_id) sessions.set(e.session_id, [...(sessions.get(e.session_id) ?? []), e]);
  t.ok(sessions.size > 200, `${sessions.size} sessions`);
  let gaps = 0;
  let beats = 0;
  const bad: string[] = [];
  for (const list of sessions.values()) {
    if (list[0]!.event_type !== 'play_start') bad.push(`${list[0]!.session_id} starts with ${list[0]!.event_type}`);
    for (let i = 1; i < list.length; i++)
      if (list[i]!.ts <= list[i - 1]!.ts) bad.push(`${list[i]!.session_id}: events out of order`);
    const at = list.filter((e) => e.event_type === 'heartbeat').map((e) => e.ts);
    beats += at.length;
    // A timer every 10 s; another event in the same instant may hold one back by under a second.
    for (let i = 1; i < at.length; i++) gaps += Math.abs(at[i]! - at[i - 1]! - 10_000) < 1000 ? 0 : 1;
  }
  t.same(bad, [], 'every session starts with play_start, its events in time order');
  t.ok(beats > 3000, `${beats} heartbeats`);
  t.equal(gaps, 0, 'heartbeats 10 s apart');
  const types = new Set(events.map((e) => e.event_type));
  for (const type of [
    'first_frame',
    'rebuffer_start',
    'rebuffer_end',
    'pause',
    'resume',
    'seek_start',
    'seek_end',
    'bitrate_change',
    'error',
    'ended',
    'session_end',
    'payment_succeeded',
    'payment_failed',
    'subscription_renewed',
  ]) {
    t.ok(types.has(type), `${type} occurs`);
  }
  t.ok(
    deliveries.some((d) => d.via === 'beacon'),
    'page-unload beacons',
  );
  // Concurrency follows the match: the innings break dips below the first innings, the final overs peak.
  const oracle = new Oracle(events);
  const at = (x: number): number =>
    oracle
      .concurrencyBySecond('sim', startAt + x * 20 * minute, startAt + x * 20 * minute + 1000)
      .get(startAt + x * 20 * minute) ?? 0;
  t.ok(
    at(0.47) < at(0.4) && at(0.4) < at(0.92),
    `break ${at(0.47)} < first innings ${at(0.4)} < final overs ${at(0.92)}`,
  );
  t.ok(Math.abs(at(0.92) - 200) < 40, `about 200 at the peak: ${at(0.92)}`);
});

t.test('a match ends with its audience leaving; a span of a day stops mid-stream', async (t) => {
  const match = play().deliveries;
  const span = play({ leaveAtEnd: false }).deliveries;
  t.same(span, match.slice(0, span.length), 'up to its end a span is the same world');
  const last = match.slice(span.length).flatMap((d) => d.events);
  const left = last.filter((e) => e.event_type === 'session_end').length;
  t.ok(left > 50, `the match's end closes the ${left} sessions still playing`);
  t.notOk(
    span.flatMap((d) => d.events).some((e) => e.ts >= startAt + 20 * minute),
    'a span sends nothing at its end: its viewers have not left',
  );
});

t.test('an incident changes playback only where and when it is injected', async (t) => {
  const incident = parseIncident('rebuffer@8m+4m:Maharashtra/bom1');
  t.same(incident, { kind: 'rebuffer', start: 8 * minute, length: 4 * minute, region: 'Maharashtra', pop: 'bom1' });
  const { events } = play({ viewers: 600, incidents: [incident] });
  const stalls = (inside: boolean, here: boolean): number => {
    const s = events.filter(
      (e) =>
        e.event_type === 'rebuffer_start' &&
        (e.context?.region === 'Maharashtra' && e.context?.pop === 'bom1') === here &&
        (e.ts >= startAt + 8 * minute && e.ts < startAt + 12 * minute) === inside,
    );
    const beats = events.filter(
      (e) =>
        e.event_type === 'heartbeat' &&
        (e.context?.region === 'Maharashtra' && e.context?.pop === 'bom1') === here &&
        (e.ts >= startAt + 8 * minute && e.ts < startAt + 12 * minute) === inside,
    );
    return s.length / Math.max(1, beats.length);
  };
  t.ok(
    stalls(true, true) > 5 * stalls(false, true),
    `stalls per heartbeat in bom1: ${stalls(true, true).toFixed(3)} during, ${stalls(false, true).toFixed(3)} outside`,
  );
  t.ok(stalls(true, false) < 2 * stalls(false, false) + 0.01, 'elsewhere unchanged');
  t.throws(() => parseIncident('earthquake@5m'), /KIND@START/);
  t.throws(() => parseIncident('rebuffer@soon'), /duration/);
  t.same(
    defaultIncidents(30 * minute).map((i) => i.kind),
    ['rebuffer', 'payments', 'startup', 'errors'],
  );
});

t.test(
  'the sender retries 429 and 503 no sooner than Retry-After, sends a beacon once, and counts what was accepted',
  async (t) => {
    const answers = [
      { status: 429, headers: { 'retry-after': '1' } },
      { status: 503, headers: {} },
      { status: 200, headers: {} },
    ];
    const seen: Array<{ at: number; path: string; body: string }> = [];
    const server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        seen.push({ at: Date.now(), path: req.url ?? '', body });
        if (req.url?.startsWith('/v1/ingest/beacon')) {
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ accepted: 0, rejected: 1, queued: false, errors: [{ code: 'rate_limited' }] }));
          return;
        }
        const a = answers.shift() ?? { status: 200, headers: {} };
        res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
        res.end(
          JSON.stringify(
            a.status === 200
              ? { accepted: 1, rejected: 1, queued: true, errors: [{ index: 1, code: 'invalid_field' }] }
              : { error: { code: 'x' } },
          ),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => server.close());
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const sender = new Sender({ ingestUrls: [url], apiKey: 'k', concurrency: 4, maxAttempts: 5, retryBeacons: false });
    const e = (id: string): OracleEvent => ({
      tenant: 'sim',
      ts: startAt,
      event_type: 'heartbeat',
      event_id: id,
      session_id: 's',
    });
    await sender.send({ via: 'events', events: [e('a'), e('b')] });
    await sender.send({ via: 'beacon', events: [e('c')] });
    await sender.drain();
    const events = seen.filter((s) => s.path === '/v1/ingest/events');
    t.equal(events.length, 3, 'two retries');
    t.ok(events[1]!.at - events[0]!.at >= 1000, 'not before Retry-After');
    t.same(
      new Set(
        events.map((s) =>
          (JSON.parse(s.body) as { events: Array<{ event_id: string }> }).events.map((x) => x.event_id).join(),
        ),
      ),
      new Set(['a,b']),
      'the same events, the same ids',
    );
    t.equal(seen.filter((s) => s.path.startsWith('/v1/ingest/beacon')).length, 1, 'a beacon is sent once');
    t.same(
      sender.accepted.map((x) => x.event_id),
      ['a'],
      'only what the answer accepted',
    );
    t.match(sender.stats, {
      accepted: 1,
      rejected: 1,
      lost: 1,
      retries: { '429': 1, '503': 1 },
      rejections: { invalid_field: 1 },
    });
  },
);

t.test(
  'the sender sends again, with their ids, the events a 200 lists as ingest_degraded, and only those',
  async (t) => {
    const bodies: string[] = [];
    const server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        bodies.push(body);
        const answer =
          bodies.length === 1
            ? {
                accepted: 2,
                rejected: 1,
                queued: true,
                errors: [
                  {
                    index: 1,
                    code: 'ingest_degraded',
                    message: 'The event bus did not acknowledge this event; send it again',
                  },
                ],
              }
            : { accepted: 1, rejected: 0, queued: true, errors: [] };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => server.close());
    const sender = new Sender({
      ingestUrls: [`http://127.0.0.1:${(server.address() as AddressInfo).port}`],
      apiKey: 'k',
      concurrency: 1,
      maxAttempts: 5,
      retryBeacons: false,
    });
    const e = (id: string): OracleEvent => ({
      tenant: 'sim',
      ts: startAt,
      event_type: 'heartbeat',
      event_id: id,
      session_id: 's',
    });
    await sender.send({ via: 'events', events: [e('a'), e('b'), e('c')] });
    await sender.drain();
    t.same(
      bodies.map((b) => (JSON.parse(b) as { events: Array<{ event_id: string }> }).events.map((x) => x.event_id)),
      [['a', 'b', 'c'], ['b']],
    );
    t.same(
      sender.accepted.map((x) => x.event_id),
      ['a', 'c', 'b'],
      'each accepted once it was acknowledged',
    );
    t.match(sender.stats, { accepted: 3, rejected: 0, retries: { ingest_degraded: 1 } });
  },
);
