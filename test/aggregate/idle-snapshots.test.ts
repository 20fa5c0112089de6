import t from 'tap';
import { pipelines } from '../../pipelines/index.js';
import { outputMark, ShardAggregator, type ShardOptions } from '../../src/aggregate/shard.js';
import { Bus } from '../../src/bus/bus.js';
import { decodeOutput, encodeEvent, frameMessage, type WireEvent } from '../../src/bus/wire.js';
import type { Cell } from '../../src/metric/pipeline.js';
import { createLogger } from '../../src/log.js';
import { natsUrl, removeNamespace, uniquePrefix } from '../helpers/env.js';

// A session's progress waits up to `snapshotEveryMs` to be snapshotted (docs/store.md "Reading sessions"). Under
// input it goes out with a later batch; when the shard has had no input since its last seal, an idle batch carries
// it, so what is stored at rest is the session's latest state. After a restart from a checkpoint, too.

const log = createLogger('error');
const prefix = uniquePrefix();
const bus = await Bus.connect({ nats_url: natsUrl, nats_prefix: prefix }, log);
await bus.ensureStreams(1, 1);
t.teardown(async () => {
  await bus.close();
  await removeNamespace(prefix);
});

const options: ShardOptions = {
  pipelines,
  checkpointEveryMs: 1000,
  flushIntervalMs: 100,
  maxInflight: 4,
  sessionRetainMs: 86_400_000,
  snapshotEveryMs: 60_000,
};
const t0 = Date.UTC(2026, 11, 7, 10);
const event = (type: string, s: number): WireEvent => ({
  tenant: 'acme',
  env: 'production',
  event_type: type,
  ts: t0 + s * 1000,
  client_ts: null,
  received_at: t0 + s * 1000,
  country: 'IN',
  region: 'Kerala',
  device: 'tv',
  session_id: 's1',
  anonymous_id: 'v1',
  position_sec: s,
});

async function send(events: WireEvent[]): Promise<number> {
  const encoded = events.map(encodeEvent);
  const body = frameMessage(
    encoded,
    encoded.reduce((n, b) => n + b.length, 0),
  );
  return (await bus.js.publish(bus.names.eventsSubject(0), body)).seq;
}

interface Batch {
  from: number;
  upTo: number;
  inputs: number;
  /** [last_ts, events, furthest_sec, version] of each session_hours row. */
  sessions: Array<[Cell, Cell, Cell, Cell]>;
}

/**
 * The raw stream's messages from the first on: until `until` says it has what it waits for (10 s at most), or, with
 * none, all there are now.
 */
async function batches(until?: (bs: Batch[]) => boolean): Promise<Batch[]> {
  const out: Batch[] = [];
  const reader = await bus.reader(bus.names.rawStream, bus.names.rawSubject(0), { seq: 1 });
  const deadline = Date.now() + 10_000;
  while (!until?.(out) && Date.now() < deadline) {
    let n = 0;
    for await (const m of await reader.fetch({ max_messages: 100, expires: 1000 })) {
      n++;
      const o = decodeOutput(m.data);
      const mark = outputMark(m.headers!);
      out.push({
        from: mark.from,
        upTo: mark.upTo,
        inputs: o.inputs.length,
        sessions: ((o.rows?.session_hours ?? []) as Cell[][]).map((r) => [r[4]!, r[11]!, r[12]!, r[r.length - 1]!]),
      });
    }
    if (!until && n === 0) break;
  }
  return out;
}

const idle = (b: Batch): boolean => b.inputs === 0 && b.from === b.upTo;

t.test('progress waits under input, goes out when the shard is idle, and again after a restart', async (t) => {
  let shard = new ShardAggregator(bus, 0, options, log);
  t.teardown(() => shard.stop());
  await shard.start();
  const first = await send([event('play_start', 0), event('first_frame', 1)]);
  let got = await batches((bs) => bs.some((b) => b.upTo === first && b.sessions.length > 0));
  t.same(
    got.find((b) => b.upTo === first && !idle(b))?.sessions,
    [[t0 + 1000, 2, 1, first]],
    'a new session in the batch of its input',
  );
  const second = await send([event('heartbeat', 10), event('heartbeat', 20)]);
  got = await batches((bs) => bs.some((b) => idle(b) && b.upTo === second));
  t.same(
    got.find((b) => b.upTo === second && !idle(b))?.sessions,
    [],
    'its progress alone is not in the batch of its input',
  );
  t.same(
    got.find((b) => idle(b) && b.upTo === second)?.sessions,
    [[t0 + 20_000, 4, 20, second]],
    'an idle batch holds its latest progress',
  );
  const seen = got.length;
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal((await batches()).length, seen, 'written once: idle seals after it publish nothing');

  // The checkpoint holds the session as owed: a shard started from it (after a stop that left the last state out)
  // writes it again at its first idle seal, and a later heartbeat an hour on is due at once.
  await shard.stop();
  const beforeRestart = (await batches()).length;
  shard = new ShardAggregator(bus, 0, options, log);
  await shard.start();
  got = await batches((bs) => bs.length > beforeRestart && bs.slice(beforeRestart).some(idle));
  t.same(
    got.slice(beforeRestart).find(idle)?.sessions,
    [[t0 + 20_000, 4, 20, second]],
    'after a restart the owed progress is written again',
  );
  const third = await send([event('heartbeat', 90)]);
  got = await batches((bs) => bs.some((b) => b.upTo === third && !idle(b)));
  t.same(
    got.find((b) => b.upTo === third && !idle(b))?.sessions,
    [[t0 + 90_000, 5, 90, third]],
    'progress behind for over a minute goes out with the batch of the input that shows it',
  );
});
