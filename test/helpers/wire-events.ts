import { Packr } from 'msgpackr';
import type { Rng } from '../../bench/simulator/rng.js';
import { frameMessage } from '../../src/bus/wire.js';

// Event stream messages for the tests of its readers (the aggregators' EventReader, the flusher's EventLines): every
// field of every type, hostile strings, unknown keys, encodings msgpackr itself seldom writes.

/** Events (any values) as an event stream message. */
export const frame = (
  events: readonly unknown[],
  packr = new Packr({ useRecords: false, moreTypes: false }),
): Buffer => {
  const encoded = events.map((e) => packr.pack(e));
  return frameMessage(
    encoded,
    encoded.reduce((s, b) => s + b.length, 0),
  );
};

export const hostile = [
  '',
  'Maharashtra',
  'तमिलनाडु',
  '\u0000',
  'tab\there',
  'line\nbreak\r',
  'back\\slash',
  'a'.repeat(31),
  'b'.repeat(32),
  'c'.repeat(255),
  'd'.repeat(256),
  'e'.repeat(70_000),
  '😀 emoji',
  "'; DROP TABLE events; --",
];

export function randomEvent(rng: Rng, i: number): Record<string, unknown> {
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
    { cdn: 'akamai', pop: 'del2' },
    { cdn: pick(hostile), cdns: 'no', cd: 'no' },
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

/**
 * Two events of hand-made bytes: uint64 (or, without `int64`, float32 and nil), int64, float32, str8/16/32, map16 and
 * array32 headers; a known field of an unexpected type; a key that is not a string.
 */
export function handMadeMessage(int64 = true): Buffer {
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
    Buffer.concat([str('ts', 'fix'), int64 ? u64(1_700_000_000_000n) : f32(1_700_000_000_000)]),
    Buffer.concat([str('client_ts', 'fix'), int64 ? i64(-1_700_000_000_000n) : Buffer.from([0xc0])]),
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
  return message;
}
