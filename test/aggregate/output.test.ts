import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pack } from 'msgpackr';
import t from 'tap';
import { pipelines } from '../../pipelines/index.js';
import { outputMark, ShardAggregator } from '../../src/aggregate/shard.js';
import { Bus } from '../../src/bus/bus.js';
import { readInputs } from '../../src/bus/passed-events.js';
import {
  decodeOutput,
  encodeEvent,
  forEachPassed,
  frameMessage,
  inputsToRead,
  type WireEvent,
} from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { uniquePrefix } from '../helpers/env.js';
import { PrivateNats } from '../../bench/private-nats.js';

// An aggregator passes its input on to the raw stream by naming each input message with the indexes of the
// duplicates it dropped; the flusher reads the events from the event stream and numbers them. Output is cut into
// parts under the server's max_payload: against a private nats-server with a 64 KiB max_payload.

const dir = mkdtempSync(join(tmpdir(), 'darshak-output-'));
const nats = await PrivateNats.withMaxPayload(dir, 65536);
const log = createLogger('error');
const bus = await Bus.connect({ nats_url: nats.url, nats_prefix: uniquePrefix() }, log);
t.teardown(async () => {
  await bus.close();
  await nats.kill();
  rmSync(dir, { recursive: true, force: true });
});

const t0 = Date.UTC(2026, 10, 21, 12);
const event = (i: number, id: string, padding: number): WireEvent => ({
  tenant: 'acme',
  env: 'production',
  event_type: i % 10 === 0 ? 'play_start' : 'heartbeat',
  ts: t0 + i * 1000,
  client_ts: t0 + i * 1000,
  received_at: t0 + i * 1000,
  event_id: id,
  country: 'IN',
  region: 'Kerala',
  device: 'tv',
  // A session each, with a long id: a snapshot row each, which fill more than one output message.
  session_id: `s${i}-${'x'.repeat(padding)}`,
});

t.test(
  'raw output: every input named once, every event passed on once in its place, duplicates dropped, under max_payload',
  async (t) => {
    await bus.ensureStreams(1, 1);
    // Messages 2 and 3 repeat events of message 1; message 3 is about 60 KB. Sealed once a second, the three are one
    // batch, whose snapshot rows (a session each) take more than one output message.
    const ids = Array.from({ length: 400 }, () => randomUUID());
    const inputs = [
      Array.from({ length: 100 }, (_, i) => event(i, ids[i]!, 110)),
      Array.from({ length: 100 }, (_, i) => event(100 + i, i % 3 === 0 ? ids[i]! : ids[100 + i]!, 110)),
      Array.from({ length: 200 }, (_, i) => event(200 + i, i % 7 === 0 ? ids[i % 100]! : ids[200 + i]!, 110)),
    ];
    const expected: string[] = [];
    const seen = new Set<string>();
    let last = 0;
    for (const events of inputs) {
      const encoded = events.map(encodeEvent);
      const body = frameMessage(
        encoded,
        encoded.reduce((n, b) => n + b.length, 0),
      );
      t.ok(body.length < 65536, `input of ${body.length} bytes fits the server`);
      last = (await bus.js.publish(bus.names.eventsSubject(0), body)).seq;
      events.forEach((e, index) => {
        if (seen.has(e.event_id!)) return;
        seen.add(e.event_id!);
        expected.push(`${last}:${index}:${e.event_id}:${e.ts}`);
      });
    }
    t.equal(expected.length, 400 - 34 - 29, 'the duplicates: 34 in message 2, 29 in message 3');

    const shard = new ShardAggregator(
      bus,
      0,
      {
        pipelines,
        checkpointEveryMs: 3_600_000,
        flushIntervalMs: 1000,
        maxInflight: 4,
        sessionRetainMs: 86_400_000,
        snapshotEveryMs: 60_000,
      },
      log,
    );
    await shard.start();
    t.teardown(() => shard.stop());
    const passed: string[] = [];
    let parts = 0;
    const named: number[] = [];
    const consumer = await bus.reader(bus.names.rawStream, bus.names.rawSubject(0), { seq: 1 });
    for (let done = false; !done;) {
      for await (const m of await consumer.fetch({ max_messages: 100, expires: 1000 })) {
        parts++;
        t.ok(m.data.length <= 65536, `part of ${m.data.length} bytes`);
        const out = decodeOutput(m.data);
        t.equal(out.v, 4);
        named.push(...inputsToRead(out));
        const input = await readInputs(bus, [out], (seq) => t.fail(`input ${seq} not found`));
        forEachPassed(out, input, (e, seq, index) => passed.push(`${seq}:${index}:${e.event_id}:${e.ts}`));
        const mark = outputMark(m.headers!);
        if (mark.upTo === last && mark.complete) done = true;
      }
    }
    t.ok(parts >= 2, `${parts} parts`);
    t.same(named, [last - 2, last - 1, last], 'each input message named once, in order');
    t.same(passed, expected, 'each event passed on once, numbered as in its input message');
  },
);

t.test(
  "a raw-stream message of another version (an earlier build's) is refused, and says where the policy is",
  async (t) => {
    const e = event(1, randomUUID(), 0);
    t.throws(
      () => decodeOutput(pack({ v: 3, inputs: [[9, 4, { v: 1, events: [e] }, []]] })),
      /raw-stream message of version 3: this build reads version 4 only \(docs\/compatibility\.md\)/,
    );
    t.throws(() => decodeOutput(pack({ events: [e] })), /version undefined/);
  },
);

t.test(
  'a publish that lands after the shard gave it up (a slow server) does not pass its input on twice',
  async (t) => {
    // Found by the soak (docs/soak.md): a shard's publish timed out while the server still had it queued; the shard
    // rebuilt from the last output it could read, passed the same input on in a batch of other bounds (another message
    // id), and then the late publish was stored too: its input counted twice. Here the first output publish is held
    // back and reported failed, and is let through right after the rebuilt shard's first publish lands.
    const slow = await Bus.connect({ nats_url: nats.url, nats_prefix: uniquePrefix() }, log);
    t.teardown(() => slow.close());
    await slow.ensureStreams(1, 1);
    const input = (from: number): Buffer => {
      const encoded = Array.from({ length: 10 }, (_, i) => encodeEvent(event(from + i, randomUUID(), 0)));
      return frameMessage(
        encoded,
        encoded.reduce((n, b) => n + b.length, 0),
      );
    };
    for (let m = 0; m < 3; m++) await slow.js.publish(slow.names.eventsSubject(0), input(10 * m));
    const publish = slow.js.publish.bind(slow.js);
    let late: (() => Promise<unknown>) | undefined;
    let held = false;
    let landed: Promise<unknown> = Promise.resolve();
    slow.js.publish = async (subject, data, opts) => {
      if (subject !== slow.names.rawSubject(0)) return publish(subject, data, opts);
      if (!held) {
        held = true;
        late = () => publish(subject, data, opts);
        // More input arrives meanwhile, so the rebuilt shard's batch has other bounds.
        await publish(slow.names.eventsSubject(0), input(30));
        throw new Error('TIMEOUT');
      }
      const ack = await publish(subject, data, opts);
      if (late) {
        landed = late().catch((err: Error) => err);
        late = undefined;
      }
      return ack;
    };
    const shard = new ShardAggregator(
      slow,
      0,
      {
        pipelines,
        checkpointEveryMs: 3_600_000,
        flushIntervalMs: 200,
        maxInflight: 4,
        sessionRetainMs: 86_400_000,
        snapshotEveryMs: 60_000,
      },
      log,
    );
    await shard.start();
    t.teardown(() => shard.stop());
    const named: number[] = [];
    const consumer = await slow.reader(slow.names.rawStream, slow.names.rawSubject(0), { seq: 1 });
    for (let done = false; !done;) {
      for await (const m of await consumer.fetch({ max_messages: 100, expires: 1000 })) {
        named.push(...inputsToRead(decodeOutput(m.data)));
        if (outputMark(m.headers!).upTo === 4) done = true;
      }
    }
    t.ok(held, 'the first output publish was held back');
    const outcome = await landed;
    t.comment(`the late publish: ${outcome instanceof Error ? outcome.message : 'stored'}`);
    // Whatever else the late publish did, the raw stream passes each input on once.
    const last = await slow.jsm.streams.getMessage(slow.names.rawStream, { last_by_subj: slow.names.rawSubject(0) });
    for (let seq = named.length + 1; seq <= last.seq; seq++)
      named.push(
        ...inputsToRead(decodeOutput((await slow.jsm.streams.getMessage(slow.names.rawStream, { seq })).data)),
      );
    t.same(named, [1, 2, 3, 4], 'each input message named once');
  },
);
