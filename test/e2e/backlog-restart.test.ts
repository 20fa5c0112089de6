import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Bus } from '../../src/bus/bus.js';
import { decodeOutput, encodeEvent, frameMessage, type WireEvent } from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { drained, eventually, freePort, RoleProcesses, uniquePrefix } from '../helpers/env.js';
import { PrivateNats } from '../../bench/private-nats.js';

// A restart behind a large backlog comes back. Overload is what makes backlogs: at a final's peak ingest coalesces
// events into messages of ~100 KB, and a shard that reads (or rebuilds from) hundreds of MB of them must bound what
// it asks the server for in bytes, or the server cuts the connection as a slow consumer and the restart fails.
// Here: ~300 MB of input, an aggregator that reads it all, kill -9 with no checkpoint (so the restart replays it
// all), a restart that must come back and read on; every input message is passed on exactly once. The server's
// slow-consumer limit is halved (32 MB), so that what a process pulls must stay well within it.

t.setTimeout(480_000);

const shards = 4;
const messages = 2400;
const eventsPerMessage = 500;

function backlogMessage(n: number, at: number): Buffer {
  const encoded: Buffer[] = [];
  let bytes = 0;
  for (let i = 0; i < eventsPerMessage; i++) {
    const e: WireEvent = {
      tenant: 'backlog',
      env: 'production',
      event_type: 'heartbeat',
      ts: at + i,
      client_ts: null,
      received_at: at,
      country: 'IN',
      region: 'Maharashtra',
      device: 'mobile',
      session_id: `s-${n % shards}-${(n * eventsPerMessage + i) % 5000}`,
      position_sec: n,
      bitrate_kbps: 4500,
      context: { cdn: 'akamai', pop: 'bom1', player: 'hls.js 1.7.0', os: 'Android', browser: 'Chrome' },
    };
    const b = encodeEvent(e);
    encoded.push(b);
    bytes += b.length;
  }
  return frameMessage(encoded, bytes);
}

/** Input sequences each shard's output passed on, in output order. */
async function passedInputs(bus: Bus): Promise<number[]> {
  const info = await bus.jsm.streams.info(bus.names.rawStream);
  const seqs: number[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const out = decodeOutput((await bus.jsm.streams.getMessage(bus.names.rawStream, { seq })).data);
    if (out.v === 4) for (const [input] of out.inputs) seqs.push(input);
  }
  return seqs;
}

t.test(
  'kill -9 of an aggregator behind a backlog of ~300 MB: the restart comes back, nothing lost or doubled',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'darshak-backlog-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'nats.conf'), `max_pending: ${32 * 1024 * 1024}\n`);
    const nats = new PrivateNats(await freePort(true), join(dir, 'js'), ['-c', join(dir, 'nats.conf')]);
    await nats.start();
    t.teardown(() => nats.kill());
    const natsUrl = nats.url;
    const prefix = uniquePrefix();
    const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, createLogger('error'), 'test-backlog');
    t.teardown(() => bus.close());
    await bus.ensureStreams(shards, 24);
    const now = Date.now() - 60_000;
    let bytes = 0;
    const inflight = new Set<Promise<unknown>>();
    for (let n = 0; n < messages; n++) {
      const data = backlogMessage(n, now + n);
      bytes += data.length;
      const p = bus.js.publish(bus.names.eventsSubject(n % shards), data).finally(() => inflight.delete(p));
      inflight.add(p);
      if (inflight.size >= 32) await Promise.race(inflight);
    }
    await Promise.all(inflight);
    t.ok(bytes > 200 * 1024 * 1024, `backlog of ${(bytes / 1024 / 1024).toFixed(0)} MB`);

    // No checkpoint before the kill: the restart replays everything the first run passed on.
    const procs = new RoleProcesses({ NATS_URL: natsUrl, NATS_PREFIX: prefix, CHECKPOINT_INTERVAL_MS: '3600000' }, t);
    t.teardown(() => procs.stopAll());
    const first = procs.start(['--role', 'aggregate']);
    t.not(
      await eventually(() => drained(prefix, shards, natsUrl, false), 240_000, 1000),
      -1,
      'the first run reads the whole backlog',
    );
    await procs.stop(first, 'SIGKILL');

    const second = procs.start(['--role', 'aggregate']);
    let exit: number | string | null = null;
    second.once('exit', (code, signal) => (exit = code ?? signal));
    // New input after the restart: only a shard that rebuilt and reads on passes it.
    for (let shard = 0; shard < shards; shard++)
      await bus.js.publish(bus.names.eventsSubject(shard), backlogMessage(messages + shard, Date.now()));
    t.not(
      await eventually(async () => exit === null && (await drained(prefix, shards, natsUrl, false)), 240_000, 1000),
      -1,
      'the restarted aggregator rebuilds and reads on',
    );
    t.equal(exit, null, 'the restarted aggregator is still running');

    const seqs = await passedInputs(bus);
    const info = await bus.jsm.streams.info(bus.names.eventsStream);
    t.equal(info.state.messages, messages + shards);
    t.equal(new Set(seqs).size, seqs.length, 'no input passed on twice');
    t.equal(seqs.length, info.state.messages, 'every input passed on');
  },
);
