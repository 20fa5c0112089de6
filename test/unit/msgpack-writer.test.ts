import { Unpackr } from 'msgpackr';
import t from 'tap';
import { MsgpackWriter } from '../../src/bus/msgpack-writer.js';

// Snapshot rows are written by hand; every value must read back with a general MessagePack reader as it was.

const reader = new Unpackr({ useRecords: false, mapsAsObjects: true });

t.test('numbers, strings, nulls and arrays of numbers read back as written', async (t) => {
  const numbers = [
    0,
    -0,
    1,
    127,
    128,
    255,
    256,
    65_535,
    65_536,
    2 ** 32 - 1,
    2 ** 32,
    2 ** 53 - 1,
    -1,
    -32,
    -33,
    -128,
    -129,
    -32_768,
    -32_769,
    -(2 ** 31),
    -(2 ** 31) - 1,
    1.5,
    -0.25,
    1e-300,
    1_795_000_000_123,
    Infinity,
    -Infinity,
  ];
  const strings = [
    '',
    'a',
    'x'.repeat(31),
    'x'.repeat(32),
    'x'.repeat(255),
    'x'.repeat(256),
    'x'.repeat(70_000),
    'तमिलनाडु',
    'क'.repeat(31),
    'क'.repeat(32),
    '😀'.repeat(15),
    "'; DROP TABLE x; --",
    '\u0000',
  ];
  const cells = [...numbers, ...strings, null, [], [1, 2.5, -3], Array.from({ length: 20 }, (_, i) => i * 1000)];
  const w = new MsgpackWriter();
  w.array(cells.length);
  for (const c of cells) w.cell(c);
  const back = reader.unpack(w.take()) as unknown[];
  t.equal(back.length, cells.length);
  cells.forEach((c, i) =>
    t.ok(
      Object.is(back[i], c) || JSON.stringify(back[i]) === JSON.stringify(c),
      `cell ${i}: ${JSON.stringify(c)?.slice(0, 40)}`,
    ),
  );
});

t.test('arrays of every header width, and a writer used again after take', async (t) => {
  const w = new MsgpackWriter();
  for (const n of [0, 15, 16, 65_535, 65_536]) {
    w.array(n);
    for (let i = 0; i < n; i++) w.number(i % 200);
    const back = reader.unpack(w.take()) as number[];
    t.equal(back.length, n, `${n} items`);
    t.equal(back[n - 1], n > 0 ? (n - 1) % 200 : undefined);
  }
});
