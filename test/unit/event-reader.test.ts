import { Packr } from 'msgpackr';
import t, { type Test } from 'tap';
import { contextAttr, EventReader, parseUuid, uuidWords } from '../../src/bus/event-reader.js';
import { decodeMessage, passedFields, type WireEvent } from '../../src/bus/wire.js';
import { Rng } from '../../bench/simulator/rng.js';
import { frame, handMadeMessage, randomEvent } from '../helpers/wire-events.js';

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
    (['pop', 'app_version', 'player', 'cdn'] as const)
      .filter((k) => contextAttr(e, k) !== expected.events[i]!.context?.[k])
      .map((k) => `${i}.${k}`),
  );
  t.same(attrs, [], `${label}: context's pop, app_version, player and cdn`);
}

t.test('random events, with hostile strings and unknown fields, read as msgpackr reads them', async (t) => {
  const rng = new Rng(7);
  for (const n of [0, 1, 15, 16, 200])
    sameAsMsgpackr(t, frame(Array.from({ length: n }, (_, i) => randomEvent(rng, i))), `${n} events`);
});

t.test('every MessagePack encoding of a number, string and container another library may write', async (t) => {
  const message = handMadeMessage();
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
