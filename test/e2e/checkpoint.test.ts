import { randomUUID } from 'node:crypto';
import t from 'tap';
import { registry } from '../../src/metrics.js';
import {
  eventually,
  makeTenant,
  natsUrl,
  post,
  readEventStream,
  removeNamespace,
  startService,
  uniquePrefix,
} from '../helpers/env.js';

// Aggregators checkpoint their state to the NATS object store: a restart replays input only from the checkpoint,
// and de-duplication holds across it.

async function rawEventIds(prefix: string): Promise<string[]> {
  return (await readEventStream(prefix, natsUrl, 'raw')).flatMap((m) => m.events.map((e) => e.event_id ?? ''));
}

async function replayedAtStart(): Promise<number> {
  const metric = await registry.getSingleMetric('darshak_aggregate_replayed_messages')?.get();
  return (metric?.values ?? []).reduce((n, v) => n + v.value, 0);
}

t.test('a restart starts from the checkpoint and still drops ids seen before it', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const ingest = await startService({ nats_prefix: prefix }, 'ingest');
  t.teardown(() => ingest.stop());
  const tenant = await makeTenant(prefix, 'cp');
  const url = `${ingest.ingestUrl}/v1/ingest/events`;
  const ids = Array.from({ length: 400 }, () => randomUUID());
  const send = async (slice: string[]): Promise<void> => {
    const r = await post(
      url,
      { events: slice.map((id) => ({ event_type: 'heartbeat', event_id: id, session_id: `s-${id.slice(0, 3)}` })) },
      { 'x-api-key': tenant.key },
    );
    t.equal(r.status, 200);
  };

  const overrides = { nats_prefix: prefix, checkpoint_interval_ms: 1000 };
  let agg = await startService(overrides, 'aggregate');
  for (let i = 0; i < 4; i++) await send(ids.slice(i * 50, i * 50 + 50));
  await new Promise((r) => setTimeout(r, 1200));
  await send(ids.slice(200, 250)); // past the interval: this message triggers a checkpoint
  const inputs = async (): Promise<number> => (await readEventStream(prefix)).length;
  t.not(await eventually(async () => (await rawEventIds(prefix)).length === 250, 10_000, 100), -1);
  await agg.started.stop(); // a clean stop writes a final checkpoint
  const before = await inputs();

  // While it is down: new events, and repeats of ids it passed on before the checkpoint.
  await send(ids.slice(250, 400));
  await send(ids.slice(0, 100));
  agg = await startService(overrides, 'aggregate');
  t.teardown(() => agg.stop());
  t.equal(await replayedAtStart(), 0, `nothing replayed: the checkpoint covered all ${before} input messages`);
  t.not(await eventually(async () => (await rawEventIds(prefix)).length >= 400, 10_000, 100), -1);
  await new Promise((r) => setTimeout(r, 500));
  const passed = await rawEventIds(prefix);
  t.equal(passed.length, 400, 'the repeats were dropped after the restart');
  t.same([...passed].sort(), [...ids].sort());
});
