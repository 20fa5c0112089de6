import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Rng } from '../../bench/simulator/rng.js';
import { decodeMessage } from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { EventLines } from '../../src/store/event-lines.js';
import { eventLine, insertEvents } from '../../src/store/events.js';
import { Store } from '../../src/store/store.js';
import { TsvLines } from '../../src/store/tsv.js';
import { frame, handMadeMessage, randomEvent } from '../helpers/wire-events.js';

// The flusher writes the events table's lines straight from the event stream's bytes: each must equal eventLine of
// the event as msgpackr decodes it, whatever the bytes, with the dropped events left out.

/** The lines of `messages` (data, ingest sequence, dropped indices) both ways. */
function bothWays(messages: ReadonlyArray<readonly [Buffer, number, number[]]>): { got: Buffer; want: Buffer } {
  const lines = new EventLines();
  const want: string[] = [];
  for (const [data, seq, dropped] of messages) {
    lines.add(data, seq, dropped);
    decodeMessage(data).events.forEach((e, i) => {
      if (!dropped.includes(i)) want.push(eventLine(e, seq, i));
    });
  }
  t.equal(lines.count, want.length, 'one line per event kept');
  return { got: lines.body.bytes, want: TsvLines.of(want).bytes };
}

function same(t: Test, messages: ReadonlyArray<readonly [Buffer, number, number[]]>, label: string): void {
  const { got, want } = bothWays(messages);
  if (got.equals(want)) return void t.pass(label);
  const g = got.toString().split('\n');
  const w = want.toString().split('\n');
  const at = g.findIndex((line, i) => line !== w[i]);
  t.fail(`${label}: line ${at} differs`, { got: g[at], wanted: w[at] });
}

t.test('random events, with hostile strings, unknown fields and dropped ones, as eventLine writes them', async (t) => {
  const rng = new Rng(11);
  let seq = 1;
  for (const n of [0, 1, 15, 16, 200, 500]) {
    const events = Array.from({ length: n }, (_, i) => randomEvent(rng, i));
    const dropped = Array.from({ length: n }, (_, i) => i).filter(() => rng.next() < 0.1);
    same(t, [[frame(events), seq++, dropped]], `${n} events, ${dropped.length} dropped`);
  }
  // Fields of types the wire format does not give them: the event is written as eventLine writes msgpackr's.
  const base = {
    tenant: 'acme',
    env: 'production',
    event_type: 'heartbeat',
    ts: 1,
    client_ts: null,
    received_at: 2,
    country: 'IN',
    region: 'r',
    device: 'tv',
  };
  const odd: Array<Record<string, unknown>> = [
    base,
    { ...base, tenant: 7, client_ts: 3 },
    { ...base, env: 'prod\tuction' },
    { ...base, ts: '1' },
    { ...base, session_id: null, position_sec: 'far', context: 'none' },
    { ...base, context: { cdn: 5, os: null } },
    { ...base, context: null, properties: null },
    { ...base, properties: 'text\n' },
    { ...base, context: { cdn: 'a' }, ['context' as string]: { os: 'b' } },
    // `undefined` as msgpackr writes it (no writer of ours does): absent, as eventLine reads it.
    {
      ...base,
      event_id: undefined,
      position_sec: undefined,
      context: { cdn: undefined, os: 'x' },
      properties: undefined,
    },
    { ...base, tenant: undefined, context: undefined },
    { ...base, client_ts: undefined },
  ];
  same(t, [[frame(odd), 900, [1]]], 'fields of other types');
  same(t, [[handMadeMessage(false), 901, []]], 'hand-made encodings (str8/16/32, map16, array32, float32, nil)');
  t.throws(() => new EventLines().add(Buffer.from([0x93, 1, 2, 3]), 1, []), /not a map/, 'a message that is not one');
});

t.test('the lines go into the events table as eventLine would have them', async (t) => {
  const log = createLogger('error');
  const dir = mkdtempSync(join(tmpdir(), 'darshak-event-lines-'));
  const store = await Store.open({ clickhouse_url: '', data_dir: dir, events_retention_days: 30 }, log);
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const rng = new Rng(3);
  const now = Date.now();
  // The random strings and fields, with times and counts the columns hold (the random ones include hostile values).
  const events = Array.from({ length: 100 }, (_, i) => ({
    ...randomEvent(rng, i),
    ts: now - i,
    client_ts: null,
    received_at: now,
    position_sec: i,
    bitrate_kbps: 4500,
  }));
  const lines = new EventLines();
  lines.add(frame(events), 5, []);
  await insertEvents(store.client, lines.body, 'event-lines:5');
  const rows = await (
    await store.client.query({
      query: 'SELECT count() AS n, uniqExact(ingest_index) AS i FROM events',
      format: 'JSONEachRow',
    })
  ).json<{ n: string; i: string }>();
  t.same(rows, [{ n: '100', i: '100' }], 'every line a row');
});
