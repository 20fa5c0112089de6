import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, type JsMsg } from 'nats';
import t, { type Test } from 'tap';
import { concurrencySeconds } from '../../pipelines/concurrency/pipeline.js';
import { snapshotTables } from '../../pipelines/index.js';
import { quotaMinutes } from '../../pipelines/quota/pipeline.js';
import { minuteOf } from '../../src/metric/pipeline.js';
import { Bus, streamIdentity } from '../../src/bus/bus.js';
import {
  encodeEvent,
  encodeRows,
  frameInput,
  frameMessage,
  frameOutput,
  type EncodedTableRows,
  type WireEvent,
} from '../../src/bus/wire.js';
import { Flusher, flushTiers, tierTables, type FlushTier } from '../../src/flush/flusher.js';
import { FlushGroups, groupScope, groupToken } from '../../src/flush/groups.js';
import { createLogger } from '../../src/log.js';
import { eventLine, insertEvents } from '../../src/store/events.js';
import { TsvLines } from '../../src/store/tsv.js';
import { insertSnapshotRows } from '../../src/store/snapshots.js';
import { Store } from '../../src/store/store.js';
import { eventually, natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';
import { PrivateNats } from '../../bench/private-nats.js';
import { freePort } from '../../bench/host.js';

// The flusher writes several raw-stream messages in one insert per table. A message sent again must be written with
// the group it was first written in, under the same tokens, or what a killed flusher had stored would be stored twice.

const log = createLogger('error');

async function namespace(t: Test): Promise<Bus> {
  const prefix = uniquePrefix();
  const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
  t.teardown(async () => {
    await bus.close();
    await removeNamespace(prefix);
  });
  return bus;
}

/** A namespace with the streams, and an embedded store of its own. */
async function withStore(t: Test): Promise<{ bus: Bus; store: Store }> {
  const bus = await namespace(t);
  await bus.ensureStreams(4, 24);
  const dir = mkdtempSync(join(tmpdir(), 'darshak-flusher-'));
  const store = await Store.open({ clickhouse_url: '', data_dir: dir, events_retention_days: 30 }, log);
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { bus, store };
}

/**
 * Event `i` (a play_start at `ts`) into the event stream, and an aggregator output naming it with `rows` (from the
 * event) into the raw stream, both on shard `i % 4`.
 */
async function publishEvent(
  bus: Bus,
  i: number,
  ts: number,
  rows: (e: WireEvent) => EncodedTableRows[],
): Promise<WireEvent> {
  const e: WireEvent = {
    tenant: 'acme',
    env: 'production',
    event_type: 'play_start',
    ts,
    client_ts: ts,
    received_at: ts,
    event_id: `e${i}`,
    country: 'IN',
    region: 'Kerala',
    device: 'tv',
    session_id: `s${i}`,
  };
  const encoded = encodeEvent(e);
  const { seq } = await bus.js.publish(bus.names.eventsSubject(i % 4), frameMessage([encoded], encoded.length));
  await bus.js.publish(bus.names.rawSubject(i % 4), frameOutput([frameInput(seq, [])], rows(e)));
  return e;
}

t.test('group records: compare-and-set per span, a message in one group only', async (t) => {
  const bus = await namespace(t);
  const kv = await bus.kv(bus.names.flushGroupsBucket);
  const a = new FlushGroups(kv, 's1');
  const b = new FlushGroups(kv, 's1');
  t.same(await b.claim([5], []), { created: [[5]], recorded: [] }, 'b knows the span, as of its own write');
  t.same(await a.claim([3, 1, 2], []), { created: [[1, 2, 3]], recorded: [] });
  t.same(
    await b.claim([3, 4], []),
    { created: [[4]], recorded: [[1, 2, 3]] },
    'b, behind, reads the span again and leaves out what a recorded',
  );
  t.same(
    await a.claim([], [6, 7, 4]),
    { created: [[6], [7]], recorded: [[4]] },
    'redelivered and unrecorded: each alone',
  );
  t.same(await a.claim([1], []), { created: [], recorded: [[1, 2, 3]] }, 'nothing new: no write');
  t.same(
    await new FlushGroups(kv, 's2').claim([1], []),
    { created: [[1]], recorded: [] },
    'another stream, other records',
  );
  t.same(await a.claim([100, 101], []), { created: [[100, 101]], recorded: [] }, 'the next span is another entry');
  await t.rejects(a.claim([99, 100], []), /across spans/);
  // One message delivered twice into a group (again, while its first delivery was held), once
  // fresh and once redelivered: recorded once. Twice, its groups [10, 11] and [10] shared the token of their first
  // sequence, the store dropped one insert, and the soak lost 11's events.
  t.same(
    await a.claim([10, 11, 10], [10, 12, 12]),
    { created: [[10, 11], [12]], recorded: [] },
    'a message in one group, however often delivered',
  );
  t.same(await b.claim([13], [10]), { created: [[13]], recorded: [[10, 11]] });
  t.equal(groupToken('raw', 's1', [7]), 'raw:s1:g7');
  t.equal(groupToken('quota_minutes', 's1', [1, 2, 3]), 'quota_minutes:s1:g1');
});

t.test(
  "the raw stream's identity, which the tokens name, outlives a NATS restart after an update; a stream made again gets another",
  async (t) => {
    // nats-server 2.9 takes a stream's creation time from its restart after an update (every process start updates
    // the streams): the flusher named its tokens after that time, and wrote messages sent again under new ones.
    const dir = mkdtempSync(join(tmpdir(), 'darshak-identity-'));
    const nats = new PrivateNats(await freePort(true), join(dir, 'js'));
    await nats.start();
    t.teardown(async () => {
      await nats.kill();
      rmSync(dir, { recursive: true, force: true });
    });
    const prefix = uniquePrefix();
    const open = async (): Promise<Bus> => {
      const bus = await Bus.connect({ nats_url: nats.url, nats_prefix: prefix }, log);
      await bus.ensureStreams(4, 24);
      return bus;
    };
    const info = async (bus: Bus) => bus.jsm.streams.info(bus.names.rawStream);
    let bus = await open();
    const first = await info(bus);
    await bus.close();
    // A crash of the server, a process start (an update), another crash: the sequence that changed the creation time
    // in a scratch run.
    await nats.kill();
    await nats.start();
    bus = await open();
    await bus.close();
    await nats.kill();
    await nats.start();
    bus = await open();
    const after = await info(bus);
    t.comment(`creation time ${first.created} then ${after.created}`);
    t.equal(streamIdentity(after.config), streamIdentity(first.config), 'the same identity after the restart');
    await bus.jsm.streams.delete(bus.names.rawStream);
    await bus.ensureStreams(4, 24);
    t.not(streamIdentity((await info(bus)).config), streamIdentity(first.config), 'a stream made again is another');
    await bus.close();
  },
);

t.test('a group recorded and half written by a flusher that died is completed, not doubled', async (t) => {
  const { bus, store } = await withStore(t);

  const t0 = Date.now() - 60_000;
  const events: WireEvent[] = [];
  for (let i = 0; i < 10; i++)
    events.push(
      await publishEvent(bus, i, t0 + i, (e) => [
        encodeRows(quotaMinutes.name, [['acme', minuteOf(e.received_at), 1]]),
      ]),
    );
  const stream = await bus.jsm.streams.info(bus.names.rawStream);
  const streamId = streamIdentity(stream.config);
  const first = stream.state.first_seq;

  // The flush role that died: each tier took the first eight messages and recorded its groups. The live tier
  // recorded 1-6 and 7-8 and stored the first group's events; the bulk tier recorded 1-3 and 4-8 and stored the first
  // group's quota rows.
  const take = async (tier: FlushTier, durable: string): Promise<JsMsg[]> => {
    await bus.ensureConsumer(bus.names.rawStream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: 15_000_000_000,
    });
    const consumer = await bus.js.consumers.get(bus.names.rawStream, durable);
    const taken: JsMsg[] = [];
    for await (const m of await consumer.fetch({ max_messages: 8, expires: 5000 })) taken.push(m);
    t.equal(taken.length, 8, `${tier} took eight`);
    return taken;
  };
  const kv = await bus.kv(bus.names.flushGroupsBucket);
  const live = await take('live', bus.names.flushConsumer);
  const seqs = live.map((m) => m.seq);
  const liveGroups = new FlushGroups(kv, groupScope('live', streamId));
  t.same((await liveGroups.claim(seqs.slice(0, 6), [])).created, [seqs.slice(0, 6)]);
  t.same((await liveGroups.claim(seqs.slice(6), [])).created, [seqs.slice(6)]);
  await insertEvents(
    store.client,
    TsvLines.of(events.slice(0, 6).map((e, i) => eventLine(e, i + 1, 0))),
    groupToken('raw', streamId, seqs.slice(0, 6)),
  );
  const bulk = await take('bulk', bus.names.flushBulkConsumer);
  const bulkGroups = new FlushGroups(kv, groupScope('bulk', streamId));
  t.same(
    (await bulkGroups.claim(seqs.slice(0, 3), [])).created,
    [seqs.slice(0, 3)],
    'the bulk tier groups its own way',
  );
  t.same((await bulkGroups.claim(seqs.slice(3), [])).created, [seqs.slice(3)]);
  await insertSnapshotRows(
    store.client,
    quotaMinutes,
    events.slice(0, 3).map((e) => ['acme', minuteOf(e.received_at), 1]),
    groupToken(quotaMinutes.name, streamId, seqs.slice(0, 3)),
  );
  // Their messages come back. The eighth is held by another flusher, stuck: it is acknowledged here, so the seventh
  // alone brings the rewrite of their group, which must read the eighth back from the stream.
  for (const taken of [live, bulk]) {
    taken[7]!.ack();
    for (const m of taken.slice(0, 7)) m.nak();
  }

  const flusher = flushTiers(bus, store, log);
  await flusher.start();
  t.teardown(() => flusher.stop());
  const done = await eventually(async () => {
    for (const name of [bus.names.flushConsumer, bus.names.flushBulkConsumer]) {
      const c = await bus.jsm.consumers.info(bus.names.rawStream, name);
      if (c.num_pending !== 0 || c.num_ack_pending !== 0 || c.ack_floor.stream_seq !== first + 9) return false;
    }
    return true;
  }, 30_000);
  t.not(done, -1, 'every message acknowledged by both tiers');
  const read = async (query: string): Promise<unknown[]> =>
    (await store.client.query({ query, format: 'JSONEachRow' })).json<unknown>();
  t.same(
    await read("SELECT event_id, count() AS n FROM events WHERE tenant = 'acme' GROUP BY event_id HAVING n != 1"),
    [],
    'no event stored twice',
  );
  t.same(await read("SELECT count() AS n FROM events WHERE tenant = 'acme'"), [{ n: '10' }], 'every event stored');
  t.same(
    await read("SELECT sum(events) AS n FROM quota_minutes WHERE tenant = 'acme'"),
    [{ n: '10' }],
    'every quota row stored once',
  );
});

t.test(
  'a flusher stopped finishes the group it writes and leaves what it read ahead to the next one, which writes it once',
  async (t) => {
    const { bus, store } = await withStore(t);
    const minute = minuteOf(Date.now() - 60_000);
    for (let i = 0; i < 20; i++)
      await bus.js.publish(
        bus.names.rawSubject(i % 4),
        frameOutput([], [encodeRows(quotaMinutes.name, [['acme', minute, 1]])]),
      );
    const stored = async (): Promise<number> =>
      Number(
        (
          await (
            await store.client.query({
              query: "SELECT sum(events) AS n FROM quota_minutes WHERE tenant = 'acme'",
              format: 'JSONEachRow',
            })
          ).json<{ n: string }>()
        )[0]!.n,
      );
    const ackPending = async (): Promise<number> =>
      (await bus.jsm.consumers.info(bus.names.rawStream, bus.names.flushBulkConsumer)).num_ack_pending;

    // The first message is written at once; the rest wait for the next group, which may start only after a minute.
    const first = new Flusher(bus, store, log, { tier: 'bulk', minIntervalMs: 600_000 });
    await first.start();
    t.not(
      await eventually(async () => (await stored()) === 1 && (await ackPending()) === 19, 20_000, 100),
      -1,
      'one message written, 19 read ahead',
    );
    await first.stop();
    t.equal(await stored(), 1, 'the stop wrote nothing more');

    const next = new Flusher(bus, store, log, { tier: 'bulk' });
    await next.start();
    t.teardown(() => next.stop());
    // After the ack wait (15 s): they were read, and are sent again.
    t.not(await eventually(async () => (await stored()) === 20, 30_000, 100), -1, 'the next flusher writes them');
    await new Promise((r) => setTimeout(r, 500));
    t.equal(await stored(), 20, 'each once');
  },
);

t.test(
  'each tier writes its own tables from its own consumer: the events and concurrency live, the rest in bulk',
  async (t) => {
    const { bus, store } = await withStore(t);
    t.same(
      tierTables('live').map((table) => table.name),
      [concurrencySeconds.name],
      'live: the tables read within a second',
    );
    t.ok(tierTables('bulk').some((table) => table.name === quotaMinutes.name));
    t.equal(tierTables('live').length + tierTables('bulk').length, snapshotTables.length, 'every table in one tier');

    const second = Math.floor(Date.now() / 1000) - 30;
    for (let i = 0; i < 6; i++)
      await publishEvent(bus, i, second * 1000, (e) => [
        encodeRows(concurrencySeconds.name, [['acme', second, 1]]),
        encodeRows(quotaMinutes.name, [['acme', minuteOf(e.received_at), 1]]),
      ]);
    const count = async (query: string): Promise<number> =>
      Number((await (await store.client.query({ query, format: 'JSONEachRow' })).json<{ n: string }>())[0]!.n);
    const stored = async () => ({
      events: await count("SELECT count() AS n FROM events WHERE tenant = 'acme'"),
      concurrency: await count("SELECT sum(sessions) AS n FROM concurrency_seconds WHERE tenant = 'acme'"),
      quota: await count("SELECT sum(events) AS n FROM quota_minutes WHERE tenant = 'acme'"),
    });
    const floor = async (name: string) =>
      (await bus.jsm.consumers.info(bus.names.rawStream, name).catch(() => null))?.ack_floor.stream_seq ?? null;

    const live = new Flusher(bus, store, log, { tier: 'live' });
    await live.start();
    t.not(
      await eventually(async () => (await stored()).concurrency === 6, 20_000, 100),
      -1,
      'the live tier writes concurrency',
    );
    t.same(await stored(), { events: 6, concurrency: 6, quota: 0 }, 'and the events, and nothing of the bulk tables');
    t.equal(await floor(bus.names.flushBulkConsumer), null, 'the bulk consumer is its own');

    const bulk = new Flusher(bus, store, log, { tier: 'bulk' });
    await bulk.start();
    t.teardown(async () => {
      await live.stop();
      await bulk.stop();
    });
    t.not(await eventually(async () => (await stored()).quota === 6, 20_000, 100), -1, 'the bulk tier writes quota');
    await new Promise((r) => setTimeout(r, 500));
    t.same(await stored(), { events: 6, concurrency: 6, quota: 6 }, 'each row once');
    t.equal(
      await floor(bus.names.flushBulkConsumer),
      await floor(bus.names.flushConsumer),
      'both tiers through the stream',
    );
  },
);
