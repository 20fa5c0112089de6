import { decodeCmcd, encodeCmcd, type Cmcd } from '@svta/cml-cmcd';
import t from 'tap';
import { customKeys, decodeReport, reportEvent, type CmcdReport } from '../../src/ingest/cmcd.js';
import { validateEvent } from '../../src/ingest/validate.js';

// Reports are encoded by @svta/cml-cmcd, the library hls.js, dash.js and Shaka use to send them, and decoded here
// both by our decoder and by the library's: the two must agree on every line.

let seed = 0x2545f491;
const random = (): number => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 4294967296;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
const int = (max: number): number => Math.floor(random() * max);

/** The library's decoded value with parameters dropped, as ours keeps it. */
function plain(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object' && 'value' in v) return plain(v.value);
  if (typeof v === 'symbol') return v.description;
  return v;
}

/** A report with a random subset of the event-mode keys CTA-5004-B defines, each with a value of its type. */
function randomReport(): Cmcd {
  const all: Record<string, () => unknown> = {
    e: () =>
      pick(['ps', 't', 'e', 'bc', 'c', 'b', 'm', 'um', 'pe', 'pc', 'rr', 'as', 'ae', 'abs', 'abe', 'sk', 'ce', 'pr']),
    ts: () => 1_790_000_000_000 + int(1e9),
    sid: () => `session-${int(1e6)}`,
    cid: () => pick(['ind-vs-aus-final', 'a "quoted" \\ id', 'x']),
    sn: () => int(1e5),
    sta: () => pick(['s', 'p', 'k', 'r', 'a', 'w', 'e', 'f', 'q', 'd']),
    pt: () => int(1e7),
    br: () => [int(20_000)],
    bl: () => [int(60_000)],
    mtp: () => [int(100_000)],
    tb: () => [int(20_000)],
    lb: () => [int(5_000)],
    ab: () => [int(5_000)],
    pb: () => [int(20_000)],
    tpb: () => [int(20_000)],
    cdn: () => pick(['akamai', 'cloudfront', 'fastly-edge-7']),
    ltc: () => int(30_000),
    dfa: () => int(500),
    msd: () => int(10_000),
    st: () => pick(['v', 'l', 'll']),
    sf: () => pick(['d', 'h', 's', 'o']),
    pr: () => pick([1, 1.5, 0.25]),
    bs: () => true,
    su: () => true,
    bg: () => true,
    d: () => int(10_000),
    ec: () => [pick(['MEDIA_ERR_DECODE', '4001', 'network'])],
    cen: () => 'custom-one',
    v: () => 2,
    [customKeys.user_id]: () => `user-${int(100)}`,
    [customKeys.content_title]: () => 'IND vs AUS, "final"',
  };
  const report: Record<string, unknown> = {};
  for (const [key, make] of Object.entries(all)) if (random() < 0.6) report[key] = make();
  return report as Cmcd;
}

t.test('our decoder reads what @svta/cml-cmcd encodes as its own decoder does', async (t) => {
  let compared = 0;
  for (let i = 0; i < 3000; i++) {
    const line = encodeCmcd(randomReport(), { reportingMode: 'event' });
    const ours = decodeReport(line);
    const theirs = Object.fromEntries(Object.entries(decodeCmcd(line)).map(([k, v]) => [k, plain(v)]));
    if (JSON.stringify(ours) !== JSON.stringify(theirs)) {
      t.same(ours, theirs, line);
      return;
    }
    compared++;
  }
  t.equal(compared, 3000, 'every line decoded alike');
});

t.test('hand-written lines: spacing, parameters, booleans, escapes, repeated keys', async (t) => {
  const cases: Array<[string, CmcdReport]> = [
    ['', {}],
    ['e=t', { e: 't' }],
    ['  e=t ,  sta=p', { e: 't', sta: 'p' }],
    ['br=(3000;v 128;a),bs', { br: [3000, 128], bs: true }],
    ['su=?0,bg=?1', { su: false, bg: true }],
    ['cid="a \\"b\\" \\\\ c"', { cid: 'a "b" \\ c' }],
    ['pr=1.25,ltc=-5', { pr: 1.25, ltc: -5 }],
    ['e=t,e=ps', { e: 'ps' }],
    ['ot=v;x=1;y', { ot: 'v' }],
    ['nor=("a" "b"),x=()', { nor: ['a', 'b'], x: [] }],
    ['*k=tok/en:1', { '*k': 'tok/en:1' }],
  ];
  // A byte sequence (no CMCD key has one) is kept as its base64 text.
  t.same(decodeReport('h=:aGVsbG8=:'), { h: 'aGVsbG8=' });
  for (const [line, want] of cases) {
    t.same(decodeReport(line), want, line);
    t.same(
      decodeReport(line),
      Object.fromEntries(Object.entries(decodeCmcd(line)).map(([k, v]) => [k, plain(v)])),
      `${line}: as the library`,
    );
  }
});

t.test('hostile lines are refused with where they break, never a crash', async (t) => {
  const bad = [
    'E=t',
    'e=t,',
    'e=t,,sta=p',
    'e="open',
    'e="bad \\n escape"',
    'e="tab\there"',
    'cid="ड"',
    'e=t sta=p',
    'br=(1 2',
    'br=(1,2)',
    'n=1234567890123456',
    'n=1.2345',
    'n=1234567890123.5',
    'n=-',
    'b=?2',
    'e=@',
    '=t',
    'h=:open',
    'x=1;',
    `e=${'9'.repeat(10_000)}`,
  ];
  for (const line of bad) t.throws(() => decodeReport(line), SyntaxError, line.slice(0, 40));
  t.throws(() => decodeReport('e=t sta=p'), { message: 'expected "," between keys at character 5' });
  // Deep or long input stays linear: a 1 MiB line of keys decodes or fails quickly.
  const started = Date.now();
  t.throws(() => decodeReport(`${'a=1,'.repeat(250_000)}`));
  t.ok(decodeReport(`${'a=1,'.repeat(250_000)}b=2`).b === 2);
  t.ok(Date.now() - started < 5000);
});

const base = { ts: 1_795_000_000_000, sid: 's-1', cid: 'match', sn: 7 };
const mapped = (r: CmcdReport): Record<string, unknown> | string => {
  const m = reportEvent(r);
  return m.kind === 'event' ? m.event : m.kind;
};

t.test('every play state becomes the event of our state machine it stands for', async (t) => {
  const want: Record<string, string> = {
    s: 'play_start',
    r: 'rebuffer_start',
    a: 'pause',
    k: 'seek_start',
    e: 'ended',
    f: 'error',
    q: 'session_end',
    p: 'first_frame',
    w: 'ignored',
    d: 'ignored',
  };
  for (const [sta, type] of Object.entries(want)) {
    const m = mapped({ ...base, e: 'ps', sta });
    t.equal(typeof m === 'string' ? m : m.event_type, type, `sta=${sta}`);
  }
  t.match(
    mapped({ ...base, e: 'ps', sta: 'p', msd: 850 }),
    { event_type: 'first_frame', properties: { startup_ms: 850 } },
    'the player\u2019s own startup delay is kept beside ours',
  );
  t.match(mapped({ ...base, e: 'ps', sta: 'f', ec: ['4001'] }), {
    event_type: 'error',
    properties: { fatal: true, code: '4001' },
  });
});

t.test('other event types', async (t) => {
  t.match(
    mapped({
      ...base,
      e: 't',
      sta: 'p',
      pt: 61_500,
      br: [3000],
      bl: [12_000],
      mtp: [25_000],
      ltc: 3100,
      dfa: 2,
      cdn: 'akamai',
      st: 'l',
      sf: 'h',
    }),
    {
      event_type: 'heartbeat',
      position_sec: 61,
      bitrate_kbps: 3000,
      content_type: 'live',
      context: { cdn: 'akamai' },
      properties: {
        buffer_ms: 12_000,
        throughput_kbps: 25_000,
        live_latency_ms: 3100,
        dropped_frames: 2,
        stream_type: 'live',
        streaming_format: 'h',
      },
    },
  );
  t.match(mapped({ ...base, e: 't', sta: 'r' }), { event_type: 'heartbeat' }, 'rebuffering goes on');
  t.equal(mapped({ ...base, e: 't', sta: 'a' }), 'ignored', 'a paused player is not watching');
  t.match(mapped({ ...base, e: 'e', ec: ['MEDIA_ERR_NETWORK', 'x'], sta: 'p' }), {
    event_type: 'error',
    properties: { fatal: false, code: 'MEDIA_ERR_NETWORK,x' },
  });
  t.match(mapped({ ...base, e: 'bc', br: [4500] }), { event_type: 'bitrate_change', bitrate_kbps: 4500 });
  t.equal(mapped({ ...base, e: 'bc' }), 'ignored', 'a bitrate change without a bitrate says nothing');
  for (const e of ['m', 'um', 'rr', 'as', 'ce', 'c', 'b', 'pr']) t.equal(mapped({ ...base, e }), 'ignored', `e=${e}`);
  t.match(reportEvent({ ...base, e: 't', sid: undefined } as unknown as CmcdReport), {
    kind: 'invalid',
    message: /sid/,
  });
  t.match(reportEvent({ e: 't', sid: 's' }), { kind: 'invalid', message: /ts/ });
  t.match(reportEvent({ ts: 1, sid: 's' }), { kind: 'invalid', message: /"e"/ });
});

t.test('identity: custom keys, the session as its own viewer, event_id from (sid, sn)', async (t) => {
  const plainStart = mapped({ ...base, e: 'ps', sta: 's' }) as Record<string, unknown>;
  t.equal(plainStart.anonymous_id, 's-1', 'no viewer key: the session is the viewer');
  t.notOk('user_id' in plainStart);
  const named = mapped({
    ...base,
    e: 'ps',
    sta: 's',
    [customKeys.user_id]: 'u-9',
    [customKeys.anonymous_id]: 'device-4',
    [customKeys.content_title]: 'Final',
    [customKeys.content_type]: 'sports',
    [customKeys.device_type]: 'tv',
    [customKeys.region]: 'Kerala',
  }) as Record<string, unknown>;
  t.match(named, {
    user_id: 'u-9',
    anonymous_id: 'device-4',
    content_title: 'Final',
    content_type: 'sports',
    context: { device_type: 'tv', region: 'Kerala' },
  });
  const again = mapped({ ...base, e: 'ps', sta: 's', pt: 5 }) as Record<string, unknown>;
  t.equal(again.event_id, plainStart.event_id, 'a report sent again has the same event_id');
  t.not((mapped({ ...base, sn: 8, e: 'ps', sta: 's' }) as Record<string, unknown>).event_id, plainStart.event_id);
  t.match(plainStart.event_id, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.notOk(
    'event_id' in (mapped({ ...base, sn: undefined, e: 't' } as unknown as CmcdReport) as Record<string, unknown>),
    'no sn, no de-duplication',
  );
});

t.test('every mapped event of random reports is a valid event, or is refused with a reason', async (t) => {
  let events = 0;
  let refused = 0;
  for (let i = 0; i < 2000; i++) {
    const m = reportEvent(decodeReport(encodeCmcd(randomReport(), { reportingMode: 'event' })));
    if (m.kind !== 'event') continue;
    const v = validateEvent(m.event, 0, false);
    // A play that names no content (no `cid`) is the one report the events endpoint would refuse too.
    if (v.ok) events++;
    else if (m.event.event_type === 'play_start' && !('content_id' in m.event) && v.error.code === 'missing_field')
      refused++;
    else t.fail(`${JSON.stringify(m.event)}: ${v.error.message}`);
  }
  t.ok(events > 100 && refused > 0, `${events} events valid, ${refused} plays without content refused`);
});
