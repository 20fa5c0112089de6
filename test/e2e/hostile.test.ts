// A deterministic corpus of hostile request bodies against POST /v1/ingest/events (and a smaller one against the
// beacon), on both HTTP engines. Every body is built to be wholly invalid, so every answer must be a 4xx with the
// contract's error body; nothing may reach JetStream, and the service must still answer afterwards.
import { createHash } from 'node:crypto';
import t from 'tap';
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { Rng as SeededRng } from '../../bench/simulator/rng.js';
import { makeTenant, natsUrl, startService, type Service, type Tenant } from '../helpers/env.js';
import { autoEngine, engineTest } from '../helpers/engines.js';

// Two engines each answer the whole corpus: 53 s of a file alone, past tap's default 120 s on a loaded machine.
t.setTimeout(300_000);

// ---------------------------------------------------------------------------------------------------------------
// Seeded PRNG (mulberry32) and helpers

/** The shared seeded generator, plus what fuzzing needs. */
class Rng extends SeededRng {
  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.below(256);
    return b;
  }
  word(n: number): string {
    let s = '';
    for (let i = 0; i < n; i++) s += 'abcdefghijklmnopqrstuvwxyz0123456789'[this.below(36)];
    return s;
  }
}

type Json = unknown;

/** An object with an own (enumerable) key, even `__proto__`, which plain assignment would turn into a prototype. */
function own(o: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  return o;
}

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** True when a body is not valid UTF-8 JSON at all. */
function unparseable(b: Buffer): boolean {
  try {
    JSON.parse(strictUtf8.decode(b));
    return false;
  } catch {
    return true;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Valid events (the raw material) and the ways one event is made invalid

const now = Date.now();
const isoAt = (r: Rng): string => new Date(now - r.below(20_000)).toISOString();

function validEvent(r: Rng): Record<string, unknown> {
  const base: Record<string, unknown> = { event_id: r.uuid(), ts: isoAt(r) };
  switch (r.below(7)) {
    case 0:
      return {
        ...base,
        event_type: 'heartbeat',
        session_id: `s_${r.word(8)}`,
        anonymous_id: `a_${r.word(6)}`,
        position_sec: r.below(5000),
        context: { device_type: 'mobile', country: 'IN', region: 'Maharashtra', os: 'Android' },
        properties: { k: r.word(4), n: r.below(10) },
      };
    case 1:
      return {
        ...base,
        event_type: 'play_start',
        session_id: `s_${r.word(8)}`,
        content_id: `c_${r.word(5)}`,
        anonymous_id: `a_${r.word(6)}`,
        content_type: 'movie',
        content_title: 'A Title',
        properties: { duration_sec: 5400 },
      };
    case 2:
      return { ...base, event_type: 'bitrate_change', session_id: `s_${r.word(8)}`, bitrate_kbps: r.below(8000) };
    case 3:
      return {
        ...base,
        event_type: 'subscription_started',
        user_id: `u_${r.word(6)}`,
        properties: { amount_inr: 199, plan: 'monthly' },
      };
    case 4:
      return {
        ...base,
        event_type: 'content_published',
        content_id: `c_${r.word(5)}`,
        content_title: 'New Show',
        content_type: 'series',
      };
    case 5:
      return { ...base, event_type: 'error', session_id: `s_${r.word(8)}`, properties: { code: 'E42', fatal: true } };
    default:
      return { ...base, event_type: 'my_app.custom_thing', anonymous_id: `a_${r.word(6)}` };
  }
}

const requiredOf: Record<string, string[][]> = {
  heartbeat: [['session_id'], ['event_type']],
  play_start: [['session_id'], ['content_id'], ['anonymous_id', 'user_id'], ['event_type']],
  bitrate_change: [['session_id'], ['bitrate_kbps'], ['event_type']],
  subscription_started: [['user_id'], ['properties'], ['event_type']],
  content_published: [['content_id'], ['content_title'], ['content_type'], ['event_type']],
  error: [['session_id'], ['event_type']],
  'my_app.custom_thing': [['event_type']],
};

const stringFields = [
  'event_id',
  'event_type',
  'ts',
  'anonymous_id',
  'user_id',
  'session_id',
  'content_id',
  'content_type',
  'content_title',
];
const notStrings: Json[] = [0, 42, -1, 3.14, true, false, null, [], ['x'], {}, { a: 'b' }, 1e308];
const notIntegers: Json[] = ['12', '', 1.5, -1, -0.5, 1e12, 2_147_483_648, true, false, null, [], {}, [1], 'NaN'];
const notContexts: Json[] = [
  'str',
  1,
  true,
  [],
  ['mobile'],
  null,
  { device_type: 'phone' },
  { device_type: 'MOBILE' },
  { device_type: 1 },
  { os: 5 },
  { os: null },
  { os: ['x'] },
  { os: { name: 'x' } },
  { unknown_key: 'x' },
  { Country: 'IN' },
  own({}, '__proto__', { os: 'x' }),
  own({}, 'constructor', 'x'),
  { ip: 'x'.repeat(513) },
  { region: 'é'.repeat(600) },
];
const notProperties: Json[] = ['str', 1, 0, true, false, [], [1, 2], null, ['a', { b: 1 }]];
const badTimestamps: Json[] = [
  'yesterday',
  '2026-01-01',
  '2026-01-01T00:00:00',
  '2026-01-01 00:00:00Z',
  '2026-13-45T99:99:99Z',
  '2026-01-01T00:00:60Z',
  '2026-01-01T00:00:00+99:99',
  '',
  ' 2026-01-01T00:00:00Z',
  '2026-01-01T00:00:00Z\n',
  '2026-01-01T00:00:00.0000000000Z',
  '1700000000000',
  'NaN',
  '2026-1-1T0:0:0Z',
  '+002026-01-01T00:00:00Z',
  'Tue, 01 Jan 2026 00:00:00 GMT',
  '2026-W01-1T00:00:00Z',
  '2026-01-01T00:00:00z',
  '2026-01-01t00:00:00Z',
  '2026-02-01T25:61:00Z',
  '9999-99-99T99:99:99.999Z',
  '2026-01-01T00:00:00\u0000Z',
  1_700_000_000_000,
  1.5,
  true,
  null,
  [],
  {},
];
function badUuids(r: Rng): Json[] {
  const u = r.uuid();
  return [
    'not-a-uuid',
    u.replace(/-/g, ''),
    `{${u}}`,
    u.slice(1),
    `${u}0`,
    `g${u.slice(1)}`,
    `${u}\n`,
    ` ${u}`,
    `urn:uuid:${u}`,
    '',
    u.replace(/-/g, '_'),
    `${u.slice(0, 9)}-${u.slice(9)}`,
    u.slice(0, 35),
    `${u.slice(0, 10)}\u0000${u.slice(11)}`,
    12345,
    null,
    true,
    [u],
    { id: u },
  ];
}
const badEventTypes: Json[] = [
  '',
  'Play_start',
  '1abc',
  '_x',
  'a'.repeat(65),
  'play start',
  'play-start',
  'плей',
  'a/b',
  '__proto__',
  'toString',
  'hasOwnProperty',
  'heart\u0000beat',
  'heartbeat\n',
  ' heartbeat',
  'HEARTBEAT',
  'x$',
  '.dot',
  'é',
];
const unknownKeys = [
  'foo',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '',
  ' ',
  'EVENT_TYPE',
  'Event_type',
  '\u0000',
  'event_type ',
  'valueOf',
  '__defineGetter__',
  'eventType',
  'timestamp',
  'tenant',
  'received_at',
  'client_ts',
  'env',
];
const loneSurrogates = ['\ud800', 'abc\udbff', '\udc00x', 'x\ud800\ud800', '\udfff\ud800', 'ok\ud83d', '\ude00ok'];

function hugeString(r: Rng): string {
  const n = r.int(513, 4000);
  const unit = r.pick(['x', 'é', '中', 'ab', 'a b']);
  return unit.repeat(Math.ceil(n / unit.length)).slice(0, Math.max(513, n));
}

function deepObject(depth: number): Json {
  let v: Json = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

/** Make one event invalid in one way (every way below fails validation on its own). */
function poison(r: Rng, e: Record<string, unknown>): Json {
  const type = String(e.event_type);
  switch (r.below(13)) {
    case 0: {
      const f = r.pick(stringFields);
      e[f] = r.pick(notStrings);
      return e;
    }
    case 1:
      e[r.pick(['position_sec', 'bitrate_kbps'])] = r.pick(notIntegers);
      return e;
    case 2:
      e.context = r.pick(notContexts);
      return e;
    case 3:
      e.properties = r.pick(notProperties);
      return e;
    case 4:
      for (const f of r.pick(requiredOf[type] ?? [['event_type']])) delete e[f];
      return e;
    case 5:
      e[r.pick(stringFields)] = hugeString(r);
      return e;
    case 6:
      return own(e, r.pick(unknownKeys), r.pick<Json>([1, 'x', null, {}, { event_type: 'heartbeat' }]));
    case 7:
      e.ts = r.pick(badTimestamps);
      return e;
    case 8:
      e.event_id = r.pick(badUuids(r));
      return e;
    case 9: {
      const s = r.pick(loneSurrogates);
      const where = r.below(5);
      if (where === 0) e.content_title = s;
      else if (where === 1) e.anonymous_id = s;
      else if (where === 2) e.context = { os: s };
      else if (where === 3) e.properties = { note: s, nested: { deeper: [1, s] } };
      else e.properties = own({}, s, 1);
      return e;
    }
    case 10:
      e.event_type = r.pick(badEventTypes);
      return e;
    case 11: {
      // properties nested past 16 levels, or serialized past 8 KiB
      e.properties = r.chance(0.5) ? deepObject(r.int(17, 400)) : { blob: 'x'.repeat(r.int(8200, 20000)) };
      return e;
    }
    default:
      return r.pick<Json>([1, 'heartbeat', null, true, false, [], [e], 1.5, '{"event_type":"heartbeat"}', [[[]]]]);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The corpus

interface Case {
  kind: string;
  body: Buffer | (() => ReadableStream<Uint8Array>);
  /** Error codes this body may be answered with (every one a 4xx). */
  codes: readonly string[];
}

const JSON_ERR = ['invalid_json'];
const SHAPE = ['invalid_body'];
const NONE_VALID = ['validation_failed'];
const ANY_400 = ['invalid_json', 'invalid_body', 'validation_failed', 'too_many_events'];
const TOO_LARGE = ['payload_too_large'];
const MiB = 1_048_576;

const batchOf = (events: Json[], sentAt?: Json): Record<string, unknown> =>
  sentAt === undefined ? { events } : { events, sent_at: sentAt };
const validBatch = (r: Rng, n = r.int(1, 5)): Record<string, unknown> =>
  batchOf(
    Array.from({ length: n }, () => validEvent(r)),
    r.chance(0.3) ? new Date(now).toISOString() : undefined,
  );
const json = (v: Json): Buffer => utf8(JSON.stringify(v));

function specials(r: Rng): Case[] {
  const out: Case[] = [];
  const add = (
    kind: string,
    body: Buffer | string | (() => ReadableStream<Uint8Array>),
    codes: readonly string[],
  ): void => {
    out.push({ kind, body: typeof body === 'string' ? utf8(body) : body, codes });
  };
  // Empty and trivial bodies
  for (const s of ['', ' ', '\n\t ', '\ufeff']) add('trivial', s, JSON_ERR);
  for (const s of [
    'null',
    '{}',
    '[]',
    '""',
    'true',
    '0',
    '-1e400',
    '"events"',
    '[{"events":[]}]',
    '{"events":[]}',
    '{"sent_at":"2026-01-01T00:00:00Z"}',
  ])
    add('trivial', s, SHAPE);
  // Deep nesting
  add('deep', '['.repeat(100_000), JSON_ERR);
  add('deep', '{"a":'.repeat(100_000), JSON_ERR);
  add('deep', `{"events":${'['.repeat(100_000)}`, JSON_ERR);
  add('deep', `{"events":${'['.repeat(100_000)}${']'.repeat(100_000)}}`, NONE_VALID);
  add('deep', `{"events":[${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}]}`, NONE_VALID);
  add(
    'deep',
    `{"events":[{"event_type":"heartbeat","session_id":"s","properties":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}]}`,
    NONE_VALID,
  );
  add(
    'deep',
    `{"events":[{"event_type":"heartbeat","session_id":"s","properties":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}]}`,
    NONE_VALID,
  );
  add(
    'deep',
    `{"events":[{"event_type":"heartbeat","session_id":"s","context":${'{"os":'.repeat(10_000)}"x"${'}'.repeat(10_000)}}]}`,
    NONE_VALID,
  );
  add(
    'deep',
    `{"events":[{"event_type":"heartbeat","session_id":"s"}],"sent_at":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
    SHAPE,
  );
  add(
    'deep',
    `{"events":[{"event_type":"heartbeat","session_id":"s"}],"x":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}`,
    SHAPE,
  );
  for (const d of [16, 17, 100, 1000, 20_000])
    add(
      'deep',
      `{"events":[{"event_type":"heartbeat","session_id":"s","properties":${'{"a":'.repeat(d)}1${'}'.repeat(d)}}]}`,
      NONE_VALID,
    );
  // Too many events
  add('too_many', json(batchOf(Array.from({ length: 501 }, () => validEvent(r)))), ['too_many_events']);
  add('too_many', json(batchOf(Array.from({ length: 10_000 }, () => ({ event_type: 'heartbeat', session_id: 's' })))), [
    'too_many_events',
  ]);
  add('too_many', json(batchOf(Array.from({ length: 10_000 }, () => ({})))), ['too_many_events']);
  add('too_many', json(batchOf(Array.from({ length: 10_000 }, (_, i) => i))), ['too_many_events']);
  add('too_many', `{"events":[${'0,'.repeat(200_000)}0]}`, ['too_many_events']);
  for (let i = 0; i < 10; i++)
    add('too_many', json(batchOf(Array.from({ length: r.int(501, 2000) }, () => validEvent(r)))), ['too_many_events']);
  // Bodies at and over 1 MiB
  const exact = Buffer.alloc(MiB, 0x20);
  json(batchOf([{ event_type: 'heartbeat' }])).copy(exact);
  add('size', exact, NONE_VALID); // exactly 1 MiB: read, parsed, refused on content
  const over = Buffer.alloc(MiB + 1, 0x20);
  json(validBatch(r, 3)).copy(over);
  add('size', over, TOO_LARGE); // just over, valid content: refused on size alone
  add('size', json(batchOf([{ event_type: 'heartbeat', session_id: 'x'.repeat(MiB) }])), TOO_LARGE);
  add('size', r.bytes(MiB + 1), TOO_LARGE);
  add('size', Buffer.alloc(4 * MiB, 0x5b), TOO_LARGE);
  add(
    'size',
    json(batchOf(Array.from({ length: 400 }, () => ({ ...validEvent(r), properties: { blob: 'y'.repeat(3000) } })))),
    TOO_LARGE,
  );
  for (const chunks of [11, 15]) {
    add(
      'size_chunked',
      () =>
        new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(utf8('{"events":[{"event_type":"heartbeat","session_id":"'));
            for (let i = 0; i < chunks; i++) c.enqueue(new Uint8Array(100_000).fill(0x61));
            c.enqueue(utf8('"}]}'));
            c.close();
          },
        }),
      TOO_LARGE,
    );
  }
  // NUL bytes
  add('nul', Buffer.alloc(64), JSON_ERR);
  add('nul', Buffer.concat([json(validBatch(r, 1)), Buffer.from([0])]), JSON_ERR);
  add('nul', Buffer.concat([Buffer.from([0]), json(validBatch(r, 1))]), JSON_ERR);
  // Encodings other than UTF-8
  add('encoding', Buffer.from(JSON.stringify(validBatch(r, 2)), 'utf16le'), JSON_ERR);
  add(
    'encoding',
    Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(JSON.stringify(validBatch(r, 2)), 'utf16le')]),
    JSON_ERR,
  );
  add(
    'encoding',
    Buffer.from(JSON.stringify(batchOf([{ event_type: 'heartbeat', session_id: 'ñandú' }])), 'latin1'),
    JSON_ERR,
  );
  // Duplicate keys: the last one wins and is the invalid one
  add('dup_keys', `{"events":${JSON.stringify(validBatch(r, 2).events)},"events":"x"}`, SHAPE);
  add('dup_keys', `{"events":[{"event_type":"heartbeat","session_id":"s","session_id":5}]}`, NONE_VALID);
  add('dup_keys', `{"events":[{"event_type":"heartbeat","session_id":"s","event_type":"BAD"}]}`, NONE_VALID);
  // Numbers JSON allows but a validator may not expect
  for (const n of ['1e400', '-1e400', '1e309', '2147483648', '-0.5', '1.0000000001', '10000001']) {
    add('numbers', `{"events":[{"event_type":"bitrate_change","session_id":"s","bitrate_kbps":${n}}]}`, NONE_VALID);
  }
  for (const n of ['1e400', '-1', '1000000001', '"199"', 'null']) {
    add(
      'numbers',
      `{"events":[{"event_type":"payment_succeeded","user_id":"u","properties":{"amount_inr":${n}}}]}`,
      NONE_VALID,
    );
  }
  // Lone surrogate escapes outside events
  add('surrogate', `{"events":[{"event_type":"heartbeat","session_id":"s"}],"\\ud800":1}`, SHAPE);
  add(
    'surrogate',
    `{"events":[{"event_type":"heartbeat","session_id":"s"}],"sent_at":"2026-01-01T00:00:00Z\\udc00"}`,
    SHAPE,
  );
  add('surrogate', `{"events":[{"event_type":"heartbeat","session_id":"\\uD800"}]}`, NONE_VALID);
  add('surrogate', `{"events":[{"event_type":"heartbeat","session_id":"\\uDBFF\\u0041"}]}`, NONE_VALID);
  add(
    'surrogate',
    `{"events":[{"event_type":"heartbeat","session_id":"s","properties":{"\\udfff":"\\ud800"}}]}`,
    NONE_VALID,
  );
  add('surrogate', `{"events":[{"event_type":"heartbeat","session_id":"s","context":{"os":"\\ud800"}}]}`, NONE_VALID);
  add('surrogate', `{"events":[{"event_type":"heartbeat","session_id":"\\ud800\\ud800"}]}`, NONE_VALID);
  add(
    'surrogate',
    `{"events":[{"event_type":"heartbeat","session_id":"\\ud83d"},{"event_type":"heartbeat","session_id":"\\ude00"}]}`,
    NONE_VALID,
  );
  return out;
}

function invalidUtf8Sequence(r: Rng): number[] {
  return r.pick([
    [0xff],
    [0xfe],
    [0xc0, 0x80],
    [0xc1, 0xbf],
    [0xe0, 0x80, 0x80],
    [0xed, 0xa0, 0x80],
    [0xed, 0xbf, 0xbf],
    [0xf4, 0x90, 0x80, 0x80],
    [0xf8, 0x88, 0x80, 0x80, 0x80],
    [0x80],
    [0xbf],
    [0xe2, 0x82],
    [0xf0, 0x9f, 0x98],
    [0xc3],
    [0xf5, 0x80, 0x80, 0x80],
  ]);
}

function generated(r: Rng, n: number): Case[] {
  const out: Case[] = [];
  while (out.length < n) {
    const roll = r.below(100);
    if (roll < 12) {
      // Truncation of a valid body
      const full = json(validBatch(r));
      const body = full.subarray(0, r.below(full.length));
      if (unparseable(body)) out.push({ kind: 'truncated', body, codes: JSON_ERR });
    } else if (roll < 24) {
      // Random byte flips of a valid body, kept only when they break the JSON (a flip inside a string can leave a valid batch)
      const body = Buffer.from(json(validBatch(r)));
      const flips = r.int(1, 4);
      for (let i = 0; i < flips; i++) {
        const at = r.below(body.length);
        body[at] = r.chance(0.5) ? (body[at] as number) ^ (1 << r.below(8)) : r.below(256);
      }
      if (unparseable(body)) out.push({ kind: 'byte_flip', body, codes: JSON_ERR });
    } else if (roll < 31) {
      // Invalid UTF-8 inside a string value (or anywhere)
      const text = JSON.stringify(validBatch(r));
      const quotes = [...text.matchAll(/":"/g)].map((m) => m.index + 3);
      const at = quotes.length > 0 && r.chance(0.8) ? r.pick(quotes) : r.below(text.length + 1);
      const pre = utf8(text.slice(0, at));
      const post = utf8(text.slice(at));
      out.push({
        kind: 'invalid_utf8',
        body: Buffer.concat([pre, Buffer.from(invalidUtf8Sequence(r)), post]),
        codes: JSON_ERR,
      });
    } else if (roll < 37) {
      const body = r.bytes(r.int(1, 4096));
      if (unparseable(body)) out.push({ kind: 'binary_noise', body, codes: JSON_ERR });
      else out.push({ kind: 'binary_noise', body, codes: ANY_400 });
    } else if (roll < 41) {
      // Raw NUL bytes inside or between tokens
      const text = json(validBatch(r));
      const at = r.below(text.length + 1);
      out.push({
        kind: 'nul',
        body: Buffer.concat([text.subarray(0, at), Buffer.alloc(r.int(1, 3)), text.subarray(at)]),
        codes: JSON_ERR,
      });
    } else if (roll < 45) {
      // `events` of the wrong type
      const events = r.pick<Json>([null, 1, 0, 'x', '[]', true, false, {}, { 0: validEvent(r) }, [], 1.5, -1]);
      out.push({
        kind: 'events_type',
        body: json(batchOf(events as Json[], r.chance(0.3) ? new Date(now).toISOString() : undefined)),
        codes: SHAPE,
      });
    } else if (roll < 50) {
      // `sent_at` of the wrong type or format, with valid events: the whole batch is refused
      const b = validBatch(r);
      b.sent_at = r.pick(badTimestamps);
      out.push({ kind: 'sent_at', body: json(b), codes: SHAPE });
    } else if (roll < 53) {
      // The body is not an object
      const v = r.pick<Json>([[validBatch(r)], validBatch(r).events, 'events', 7, null, true, [], [[]]]);
      out.push({ kind: 'not_object', body: json(v), codes: SHAPE });
    } else if (roll < 57) {
      // Unknown top-level fields next to valid events
      const b = validBatch(r);
      own(
        b,
        r.pick([
          'extra',
          '__proto__',
          'constructor',
          'Events',
          '',
          'sent_at ',
          'toString',
          'prototype',
          '\u0000',
          'api_key',
        ]),
        r.pick<Json>([1, {}, { events: [] }, 'x', null]),
      );
      out.push({ kind: 'unknown_top', body: json(b), codes: SHAPE });
    } else {
      // A batch whose every event is poisoned in its own way
      const events = Array.from({ length: r.chance(0.7) ? r.int(1, 3) : r.int(4, 40) }, () => poison(r, validEvent(r)));
      out.push({
        kind: 'poisoned_events',
        body: json(batchOf(events, r.chance(0.3) ? new Date(now).toISOString() : undefined)),
        codes: NONE_VALID,
      });
    }
  }
  return out;
}

const corpusSeed = 0xda25_4a4c;
function buildCorpus(seed: number): Case[] {
  const r = new Rng(seed);
  return [...specials(r), ...generated(r, 10_200)];
}
function digest(cases: readonly Case[]): string {
  const h = createHash('sha256');
  for (const c of cases) {
    h.update(c.kind);
    if (Buffer.isBuffer(c.body)) h.update(c.body);
  }
  return h.digest('hex');
}
const corpus: Case[] = buildCorpus(corpusSeed);

// ---------------------------------------------------------------------------------------------------------------
// Sending

async function pool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i] as T, i);
      }
    }),
  );
}

interface Failure {
  i: number;
  kind: string;
  problem: string;
}

async function streamMessages(jsm: JetStreamManager, svc: Service): Promise<number> {
  const info = await jsm.streams.info(`${svc.config.nats_prefix}_events`);
  return info.state.messages;
}

function checkErrorBody(status: number, headers: Headers, text: string, codes: readonly string[]): string | null {
  if (status < 400 || status >= 500) return `status ${status}: ${text.slice(0, 200)}`;
  let body: { error?: { code?: unknown; message?: unknown; request_id?: unknown; details?: unknown } };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return `status ${status} with a body that is not JSON: ${text.slice(0, 200)}`;
  }
  const e = body.error;
  if (!e || typeof e !== 'object') return `no "error" object: ${text.slice(0, 200)}`;
  if (typeof e.code !== 'string' || !/^[a-z][a-z0-9_]*$/.test(e.code)) return `bad code ${String(e.code)}`;
  if (typeof e.message !== 'string' || e.message.length === 0) return 'no message';
  if (typeof e.request_id !== 'string' || e.request_id !== headers.get('x-request-id'))
    return `request_id ${String(e.request_id)} != X-Request-Id ${headers.get('x-request-id')}`;
  if (e.details !== undefined && !Array.isArray(e.details)) return 'details is not an array';
  if (!codes.includes(e.code))
    return `code ${e.code} (status ${status}), expected one of ${codes.join('|')}: ${String(e.message).slice(0, 160)}`;
  const expectedStatus = e.code === 'payload_too_large' ? 413 : 400;
  if (status !== expectedStatus) return `code ${e.code} with status ${status}`;
  if (!headers.get('ratelimit-limit')) return 'no RateLimit-Limit header';
  return null;
}

function tally(failures: Failure[], statuses: Map<string, number>): string {
  return `${[...statuses.entries()].map(([k, v]) => `${k}=${v}`).join(' ')}${failures.length ? ` failures=${failures.length}` : ''}`;
}

const oneValid = (r: Rng): string => JSON.stringify({ events: [validEvent(r)] });

let nc: NatsConnection;
let jsm: JetStreamManager;

t.before(async () => {
  nc = await connect({ servers: natsUrl });
  jsm = await nc.jetstreamManager();
});
t.teardown(async () => {
  await nc?.close();
});

t.test('the corpus is large, deterministic and wholly invalid by construction', async (t) => {
  t.ok(corpus.length >= 10_000, `${corpus.length} bodies`);
  t.equal(digest(buildCorpus(corpusSeed)), digest(corpus), 'the same seed gives the same bytes');
  t.not(digest(buildCorpus(corpusSeed + 1)), digest(corpus), 'another seed gives other bytes');
  const kinds = new Map<string, number>();
  for (const c of corpus) kinds.set(c.kind, (kinds.get(c.kind) ?? 0) + 1);
  t.comment([...kinds.entries()].map(([k, v]) => `${k}=${v}`).join(' '));
  t.ok((kinds.get('poisoned_events') ?? 0) > 4000);
});

for (const engine of ['uws', 'node'] as const) {
  t.test(
    `hostile bodies on the ${engine} engine: every answer a 4xx error body, nothing published`,
    engineTest(engine),
    async (t) => {
      const svc = await startService({ http_engine: engine });
      t.teardown(() => svc.stop());
      const tenant: Tenant = await makeTenant(svc.config.nats_prefix);
      const r = new Rng(7);
      const url = `${svc.ingestUrl}/v1/ingest/events`;
      const headers = { 'content-type': 'application/json', 'x-api-key': tenant.key };

      // One accepted event first, so the stream's count is known not to be trivially zero.
      const first = await fetch(url, { method: 'POST', headers, body: oneValid(r) });
      t.equal(first.status, 200);
      t.match(await first.json(), { accepted: 1, rejected: 0 });
      const before = await streamMessages(jsm, svc);
      t.equal(before, 1, 'the accepted event is one message in the stream');

      const failures: Failure[] = [];
      const statuses = new Map<string, number>();
      const started = Date.now();
      await pool(corpus, 32, async (c, i) => {
        try {
          const init: RequestInit & { duplex?: 'half' } = { method: 'POST', headers };
          if (typeof c.body === 'function') {
            init.body = c.body();
            init.duplex = 'half';
          } else init.body = c.body;
          const res = await fetch(url, init);
          const text = await res.text();
          statuses.set(String(res.status), (statuses.get(String(res.status)) ?? 0) + 1);
          const problem = checkErrorBody(res.status, res.headers, text, c.codes);
          if (problem) failures.push({ i, kind: c.kind, problem });
        } catch (err) {
          const e = err as Error & { cause?: Error };
          failures.push({
            i,
            kind: c.kind,
            problem: `connection error: ${e.message}${e.cause ? ` (${e.cause.message})` : ''}`,
          });
        }
      });
      const elapsed = Date.now() - started;
      t.comment(`${engine}: ${corpus.length} bodies in ${elapsed} ms: ${tally(failures, statuses)}`);
      t.same(failures.slice(0, 15), [], 'every body answered with a 4xx error body and the expected code');
      t.equal(failures.length, 0, 'no failures at all');
      t.notOk(
        [...statuses.keys()].some((s) => s.startsWith('5')),
        'never a 5xx',
      );

      const health = await fetch(`${svc.ingestUrl}/healthz`);
      t.equal(health.status, 200, '/healthz still answers');
      t.equal((await fetch(`${svc.ingestUrl}/readyz`)).status, 200, '/readyz still answers');
      t.equal(await streamMessages(jsm, svc), before, 'nothing from a rejected batch reached the stream');

      // A body streamed (no Content-Length) past the cap and within the drain limit: both engines read it to its end
      // and answer 413 (docs/errors.md "Bodies over the cap").
      let streamed: string;
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers,
          duplex: 'half',
          body: new ReadableStream<Uint8Array>({
            start(c) {
              for (let i = 0; i < 40; i++) c.enqueue(new Uint8Array(100_000).fill(0x61));
              c.close();
            },
          }),
        });
        await res.text();
        streamed = String(res.status);
      } catch (err) {
        streamed = `connection error: ${((err as Error & { cause?: Error }).cause ?? (err as Error)).message}`;
      }
      t.equal(streamed, '413', 'a 4 MB chunked upload is answered 413');

      // And the service still ingests.
      const after = await fetch(url, { method: 'POST', headers, body: oneValid(r) });
      t.equal(after.status, 200);
      t.match(await after.json(), { accepted: 1, rejected: 0 });
      t.equal(await streamMessages(jsm, svc), before + 1);
    },
  );
}

t.test('hostile beacons: always 200 with accepted 0, nothing published', async (t) => {
  const svc = await startService({ http_engine: autoEngine });
  t.teardown(() => svc.stop());
  const tenant = await makeTenant(svc.config.nats_prefix);
  const beacon = `${svc.ingestUrl}/v1/ingest/beacon?api_key=${encodeURIComponent(tenant.key)}`;
  const r = new Rng(99);
  const before = await streamMessages(jsm, svc);

  const small = corpus.filter((c) => Buffer.isBuffer(c.body) && c.body.length < 64 * 1024);
  const picked: Case[] = [];
  for (let i = 0; i < 300; i++) picked.push(r.pick(small));
  picked.push(...corpus.filter((c) => c.kind === 'size').slice(0, 2));

  interface Beacon {
    what: string;
    url: string;
    type?: string;
    body?: Buffer | string;
  }
  const beacons: Beacon[] = [];
  picked.forEach((c, i) => {
    const type = ['text/plain;charset=UTF-8', 'application/json', 'text/plain'][i % 3] as string;
    beacons.push({ what: `${c.kind} as ${type}`, url: beacon, type, body: c.body as Buffer });
  });
  // adata: the payload in the query string; the body (here a valid batch) is then ignored.
  const textual = small.filter((c) => {
    try {
      strictUtf8.decode(c.body as Buffer);
      return (c.body as Buffer).length < 1500;
    } catch {
      return false;
    }
  });
  for (let i = 0; i < 150; i++) {
    const c = r.pick(textual);
    beacons.push({
      what: `adata ${c.kind}`,
      url: `${beacon}&adata=${encodeURIComponent((c.body as Buffer).toString('utf8'))}`,
      type: 'text/plain',
      body: i % 2 ? oneValid(r) : '',
    });
  }
  for (const raw of [
    '',
    '%ZZ',
    '%',
    '%ED%A0%80',
    '%00',
    'null',
    '%5B%5D',
    '%7B%7D',
    '%7B%22events%22%3A5%7D',
    encodeURIComponent('{"events":[{"event_type":"heartbeat","session_id":"\\ud800"}]}'),
    encodeURIComponent('['.repeat(1000)),
  ]) {
    beacons.push({
      what: `adata raw ${raw.slice(0, 20)}`,
      url: `${beacon}&adata=${raw}`,
      type: 'text/plain',
      body: '',
    });
  }
  // No key, a wrong key, a key sent twice: still 200 with nothing accepted.
  beacons.push({ what: 'no key', url: `${svc.ingestUrl}/v1/ingest/beacon`, type: 'text/plain', body: oneValid(r) });
  beacons.push({
    what: 'wrong key',
    url: `${svc.ingestUrl}/v1/ingest/beacon?api_key=dk_live_nope`,
    type: 'text/plain',
    body: oneValid(r),
  });
  beacons.push({ what: 'empty body', url: beacon, type: 'text/plain', body: '' });

  const failures: Failure[] = [];
  const started = Date.now();
  await pool(beacons, 32, async (b, i) => {
    try {
      const res = await fetch(b.url, {
        method: 'POST',
        headers: b.type ? { 'content-type': b.type } : {},
        body: b.body ?? null,
      });
      const text = await res.text();
      if (res.status !== 200) {
        failures.push({ i, kind: b.what, problem: `status ${res.status}: ${text.slice(0, 200)}` });
        return;
      }
      const body = JSON.parse(text) as { accepted?: unknown; queued?: unknown; errors?: unknown; request_id?: unknown };
      if (
        body.accepted !== 0 ||
        body.queued !== false ||
        !Array.isArray(body.errors) ||
        body.errors.length === 0 ||
        typeof body.request_id !== 'string'
      ) {
        failures.push({ i, kind: b.what, problem: `unexpected body ${text.slice(0, 200)}` });
      }
    } catch (err) {
      const e = err as Error & { cause?: Error };
      failures.push({
        i,
        kind: b.what,
        problem: `connection error: ${e.message}${e.cause ? ` (${e.cause.message})` : ''}`,
      });
    }
  });
  t.comment(`${beacons.length} beacons in ${Date.now() - started} ms`);
  t.same(failures.slice(0, 15), [], 'every beacon answered 200 with accepted 0');
  t.equal(failures.length, 0);
  t.equal((await fetch(`${svc.ingestUrl}/healthz`)).status, 200);
  t.equal(await streamMessages(jsm, svc), before, 'nothing published');
});
