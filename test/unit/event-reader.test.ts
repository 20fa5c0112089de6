import { Packr } from 'msgpackr';
import t, { type Test } from 'tap';
import { contextAttr, EventReader, parseUuid, uuidWords } from '../../src/bus/event-reader.js';
import { decodeMessage, frameMessage, passedFields, type WireEvent } from '../../src/bus/wire.js';
import { Rng } from '../../bench/simulator/rng.js';

// The aggregators' reader must read every field of WireEvent exactly as msgpackr does, whatever the bytes.

const fields = [
  'tenant',
  'env',
  'event_type',
  'ts',
  'client_ts',
  'received_at',
  'event_id',
  'country',
  'region',
  'device',
  ...passedFields,
] as const satisfies ReadonlyArray<keyof WireEvent>;

const frame = (events: readonly unknown[], packr = new Packr({ useRecords: false, moreTypes: false })): Buffer => {
  const encoded = events.map((e) => packr.pack(e));
  return frameMessage(
    encoded,
    encoded.reduce((s, b) => s + b.length, 0),
  );
};

function sameAsMsgpackr(t: Test, data: Buffer, label: string): void {
  const expected = decodeMessage(data);
  const got = new EventReader().read(data);
  t.equal(got.v, expected.v, `${label}: version`);
  t.equal(got.events.length, expected.events.length, `${label}: count`);
  let differ = 0;
  got.events.forEach((e, i) => {
    for (const f of fields) {
      // msgpackr gives a 64-bit integer as a BigInt, which no arithmetic of the runtime takes; the reader, a number.
      const raw = (expected.events[i] as unknown as Record<string, unknown>)[f];
      const want = typeof raw === 'bigint' ? Number(raw) : raw;
      if (JSON.stringify(e[f]) !== JSON.stringify(want) || typeof e[f] !== typeof want) {
        if (differ++ < 5)
          t.fail(
            `${label}: event ${i} ${f}: ${JSON.stringify(e[f])} (${typeof e[f]}) against ${JSON.stringify(want)} (${typeof want})`,
          );
      }
    }
  });
  t.equal(differ, 0, `${label}: every field as msgpackr reads it`);
  // The context keys read with the event (session attributes), as a lookup in msgpackr's context reads them.
  const attrs = got.events.flatMap((e, i) =>
    (['pop', 'app_version', 'player'] as const)
      .filter((k) => contextAttr(e, k) !== expected.events[i]!.context?.[k])
      .map((k) => `${i}.${k}`),
  );
  t.same(attrs, [], `${label}: context's pop, app_version and player`);
}

const hostile = [
  '',
  'Maharashtra',
  'तमिलनाडु',
  '\u0000',
  'a'.repeat(31),
  'b'.repeat(32),
  'c'.repeat(255),
  'd'.repeat(256),
  'e'.repeat(70_000),
  '😀 emoji',
  "'; DROP TABLE events; --",
];

function randomEvent(rng: Rng, i: number): Record<string, unknown> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;
  const e: Record<string, unknown> = {
    tenant: pick(['acme', 'demo', 'टाटा']),
    env: pick(['production', 'staging']),
    event_type: pick(['heartbeat', 'play_start', 'error', 'subscription_started', 'custom']),
    ts: pick([1_700_000_000_000 + i, 0, 2 ** 53 - 1, 1.5]),
    client_ts: pick([null, 1_700_000_000_123, -5]),
    received_at: 1_700_000_000_000 + i * 7,
    country: pick(['IN', '', 'US']),
    region: pick(hostile),
    device: pick(['tv', 'mobile', '']),
  };
  const maybe = (k: string, values: readonly unknown[]): void => {
    if (rng.next() < 0.6) e[k] = pick(values);
  };
  maybe('event_id', [
    '0b8f3e4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b',
    '0B8F3E4A-1C2D-4E5F-8A9B-0C1D2E3F4A5B',
    'not-a-uuid',
    'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz',
    '',
  ]);
  maybe('session_id', [`s-${i}`, ...hostile]);
  maybe('anonymous_id', [`a-${i}`, ...hostile]);
  maybe('user_id', [`u-${i % 7}`, ...hostile]);
  maybe('content_id', ['final', ...hostile]);
  maybe('content_type', ['live', 'vod']);
  maybe('content_title', hostile);
  maybe('position_sec', [0, 12.5, 1e9, -1, 255, 256, 65_536, 2 ** 32 + 1]);
  maybe('bitrate_kbps', [4500, 0.1]);
  maybe('context', [
    { pop: 'pop-1' },
    { pop: 'तमिल', ip: '1.2.3.4' },
    {},
    { device_type: 'tv' },
    { pop: 'x', pop2: 'y' },
    { app_version: '5.13.0', player: 'shaka', pop: 'bom1' },
    { player: pick(hostile), app_version: pick(hostile), app_versions: 'no' },
  ]);
  maybe('properties', [
    { fatal: true, code: 'E42' },
    { duration_sec: 10_800 },
    { nested: { a: [1, 'two', null, { b: -3 }] } },
    {},
  ]);
  // Keys no version of ours writes: skipped, and the rest still read.
  maybe('unknown_field', [1, 'x', [1, 2, { a: null }], { deep: { deeper: [true, false] } }, null]);
  return e;
}

t.test('random events, with hostile strings and unknown fields, read as msgpackr reads them', async (t) => {
  const rng = new Rng(7);
  for (const n of [0, 1, 15, 16, 200])
    sameAsMsgpackr(t, frame(Array.from({ length: n }, (_, i) => randomEvent(rng, i))), `${n} events`);
});

t.test('every MessagePack encoding of a number, string and container another library may write', async (t) => {
  // Hand-made bytes: uint64, int64, float32, str8/16/32, map16 and array32 headers, which msgpackr itself seldom writes.
  const str = (s: string, type: 'fix' | 8 | 16 | 32): Buffer => {
    const b = Buffer.from(s);
    if (type === 'fix') return Buffer.concat([Buffer.from([0xa0 | b.length]), b]);
    const h =
      type === 8
        ? Buffer.from([0xd9, b.length])
        : type === 16
          ? Buffer.from([0xda, b.length >> 8, b.length & 0xff])
          : Buffer.alloc(5);
    if (type === 32) {
      h[0] = 0xdb;
      h.writeUInt32BE(b.length, 1);
    }
    return Buffer.concat([h, b]);
  };
  const u64 = (n: bigint): Buffer => {
    const b = Buffer.alloc(9);
    b[0] = 0xcf;
    b.writeBigUInt64BE(n, 1);
    return b;
  };
  const i64 = (n: bigint): Buffer => {
    const b = Buffer.alloc(9);
    b[0] = 0xd3;
    b.writeBigInt64BE(n, 1);
    return b;
  };
  const f32 = (n: number): Buffer => {
    const b = Buffer.alloc(5);
    b[0] = 0xca;
    b.writeFloatBE(n, 1);
    return b;
  };
  const entries: Buffer[] = [
    Buffer.concat([str('tenant', 8), str('acme', 32)]),
    Buffer.concat([str('env', 16), str('production', 8)]),
    Buffer.concat([str('event_type', 'fix'), str('heartbeat', 16)]),
    Buffer.concat([str('ts', 'fix'), u64(1_700_000_000_000n)]),
    Buffer.concat([str('client_ts', 'fix'), i64(-1_700_000_000_000n)]),
    Buffer.concat([str('received_at', 'fix'), Buffer.from([0xd2, 0x7f, 0xff, 0xff, 0xff])]),
    Buffer.concat([str('position_sec', 'fix'), f32(1.5)]),
    Buffer.concat([str('bitrate_kbps', 'fix'), Buffer.from([0xd1, 0xff, 0x00])]),
    Buffer.concat([str('country', 'fix'), str('IN', 32)]),
    Buffer.concat([str('region', 'fix'), str('Maharashtra', 16)]),
    Buffer.concat([str('device', 'fix'), str('tv', 'fix')]),
    Buffer.concat([str('session_id', 'fix'), str('s-1', 32)]),
    // A known field of an unexpected type, and a timestamp extension where a string belongs.
    Buffer.concat([str('content_id', 'fix'), Buffer.from([0x2a])]),
    Buffer.concat([str('user_id', 'fix'), Buffer.from([0xd6, 0xff, 0x65, 0x53, 0xf1, 0x00])]),
    Buffer.concat([str('context', 'fix'), Buffer.from([0xde, 0x00, 0x01]), str('pop', 16), str('pop-9', 8)]),
    // A key that is not a string.
    Buffer.concat([Buffer.from([0x07]), str('seven', 'fix')]),
  ];
  const event = Buffer.concat([Buffer.from([0xde, 0x00, entries.length]), ...entries]);
  const message = Buffer.concat([
    Buffer.from([0x82, 0xa1, 0x76, 0x01, 0xa6]),
    Buffer.from('events'),
    Buffer.from([0xdd, 0, 0, 0, 2]),
    event,
    event,
  ]);
  sameAsMsgpackr(t, message, 'hand-made encodings');
  const [e] = new EventReader().read(message).events;
  t.equal(e!.client_ts, -1_700_000_000_000, 'int64 as a number');
  t.equal(e!.ts, 1_700_000_000_000);
  t.equal(e!.pop, 'pop-9', 'pop read from a map16 context');
  t.equal(e!.content_id, 42, 'a number where a string was expected stays what it is');
});

t.test('interned strings are the same values, and a field of many values does not break them', async (t) => {
  const reader = new EventReader();
  const base = {
    tenant: 'acme',
    env: 'production',
    event_type: 'heartbeat',
    ts: 1,
    client_ts: null,
    received_at: 1,
    country: 'IN',
    device: 'tv',
  };
  // 40,000 distinct regions: more than the table keeps.
  const events = Array.from({ length: 40_000 }, (_, i) => ({ ...base, region: `region-${i}` }));
  const read = reader.read(frame(events)).events;
  t.ok(
    read.every((e, i) => e.region === `region-${i}`),
    'each read right, kept or not',
  );
  const again = reader.read(frame(events)).events;
  t.ok(
    again.every((e, i) => e.region === `region-${i}`),
    'and again',
  );
});

t.test('UUIDs: parsed to 128 bits in either case; anything else is not one', async (t) => {
  const b = (s: string): Buffer => Buffer.from(s, 'latin1');
  t.ok(parseUuid(b('0b8f3e4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b'), 0, 36));
  t.same([...uuidWords], [0x0b8f3e4a, 0x1c2d4e5f, 0x8a9b0c1d, 0x2e3f4a5b]);
  t.ok(parseUuid(b('xx0B8F3E4A-1C2D-4E5F-8A9B-0C1D2E3F4A5B'), 2, 36), 'upper case, at an offset');
  t.same([...uuidWords], [0x0b8f3e4a, 0x1c2d4e5f, 0x8a9b0c1d, 0x2e3f4a5b]);
  t.ok(parseUuid(b('ffffffff-ffff-ffff-ffff-ffffffffffff'), 0, 36));
  t.same([...uuidWords], [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], 'unsigned words');
  for (const s of [
    '0b8f3e4a1c2d4e5f8a9b0c1d2e3f4a5b',
    '0b8f3e4a-1c2d-4e5f-8a9b-0c1d2e3f4a5g',
    '0b8f3e4a-1c2d-4e5f-8a9b-0c1d2e3f4a5',
    '0b8f3e4a_1c2d-4e5f-8a9b-0c1d2e3f4a5b',
    '-b8f3e4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b',
  ]) {
    t.notOk(parseUuid(b(s), 0, s.length), s);
  }
});

t.test('a message that is not one fails clearly', async (t) => {
  const reader = new EventReader();
  t.throws(() => reader.read(Buffer.from([0x93, 1, 2, 3])), /not a map/);
  const packr = new Packr({ useRecords: false });
  t.throws(() => reader.read(packr.pack({ v: 1, events: 'no' })), /not an array/);
  t.throws(() => reader.read(packr.pack({ v: 1, events: [1] })), /not a map/);
});
