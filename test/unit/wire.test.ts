import { Unpackr } from 'msgpackr';
import t from 'tap';
import {
  decodeMessage,
  decodeOutput,
  encodeEvent,
  encodeRows,
  frameInput,
  frameMessage,
  frameOutput,
  partitionKey,
  shardOf,
  type WireEvent,
} from '../../src/bus/wire.js';

const event = (i: number): WireEvent => ({
  tenant: 'acme',
  env: 'production',
  event_type: 'heartbeat',
  ts: 1_700_000_000_000 + i,
  client_ts: null,
  received_at: 1_700_000_000_000,
  session_id: `s${i}`,
  country: 'IN',
  region: 'Maharashtra',
  device: 'tv',
  properties: { nested: { ok: [1, 'two', null] } },
});

t.test('framed messages are plain MessagePack: a generic decoder reads them', async (t) => {
  const generic = new Unpackr({ useRecords: false, mapsAsObjects: true });
  for (const n of [0, 1, 15, 16, 300, 70_000]) {
    const events = Array.from({ length: n }, (_, i) => event(i));
    const encoded = events.map(encodeEvent);
    const framed = frameMessage(
      encoded,
      encoded.reduce((s, b) => s + b.length, 0),
    );
    t.same(decodeMessage(framed), { v: 1, events }, `${n} events`);
    t.same(generic.unpack(framed), { v: 1, events }, 'no msgpackr extension needed');
  }
});

t.test('an output message holds rows of any number of tables (a map header past 15 entries)', async (t) => {
  for (const tables of [1, 15, 16, 40]) {
    const rows = Array.from({ length: tables }, (_, i) => encodeRows(`table_${i}`, [['acme', i, 1]]));
    const out = decodeOutput(frameOutput([frameInput(7, [])], rows));
    t.same(Object.keys(out.rows ?? {}).length, tables, `${tables} tables`);
    t.same(out.rows?.[`table_${tables - 1}`], [['acme', tables - 1, 1]]);
    t.same(
      new Unpackr({ useRecords: false }).unpack(frameOutput([], rows)),
      { v: 4, inputs: [], rows: out.rows },
      'plain MessagePack',
    );
  }
});

t.test('shards: stable, in range, spread', async (t) => {
  t.equal(shardOf('acme', 'session-1', 4), shardOf('acme', 'session-1', 4));
  t.equal(shardOf('acme', 'session-1', 4), 1, 'pinned: a change here moves every session to another shard');
  const counts = new Array<number>(8).fill(0);
  for (let i = 0; i < 8000; i++) {
    const s = shardOf('acme', `session-${i}`, 8);
    counts[s] = (counts[s] ?? 0) + 1;
  }
  t.equal(
    counts.reduce((a, b) => a + b, 0),
    8000,
    'every shard in range',
  );
  for (const c of counts) t.ok(c > 800 && c < 1200, `balanced: ${c}`);
  t.equal(partitionKey({ session_id: 's', user_id: 'u' }), 's');
  t.equal(partitionKey({ user_id: 'u' }), 'u:u');
  t.equal(partitionKey({ anonymous_id: 'a' }), 'a:a');
  t.equal(partitionKey({ content_id: 'c' }), 'c:c');
});
