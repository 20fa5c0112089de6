import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { recallSessions } from '../../src/aggregate/recall.js';
import { Bus } from '../../src/bus/bus.js';
import type { HistoryAnswer } from '../../src/contracts/history.js';
import { serveHistory } from '../../src/flush/history-service.js';
import { createLogger } from '../../src/log.js';
import { eventLine, insertEvents } from '../../src/store/events.js';
import { TsvLines } from '../../src/store/tsv.js';
import { Store } from '../../src/store/store.js';
import { uniquePrefix } from '../helpers/env.js';
import { eventAt } from '../helpers/pipeline.js';
import { PrivateNats } from '../../bench/private-nats.js';

// A recalled session can be larger than a NATS message: the flush role answers in pages cut under the server's
// max_payload, and the aggregator asks page after page. Against a private nats-server with a 64 KiB max_payload.

const dir = mkdtempSync(join(tmpdir(), 'darshak-history-'));
const nats = await PrivateNats.withMaxPayload(dir, 65536);
const log = createLogger('error');
const bus = await Bus.connect({ nats_url: nats.url, nats_prefix: uniquePrefix() }, log);
const store = await Store.open({ clickhouse_url: '', data_dir: join(dir, 'data'), events_retention_days: 30 }, log);
const history = serveHistory(bus, store, log);
t.teardown(async () => {
  await history.drain();
  await store.close();
  await bus.close();
  await nats.kill();
  rmSync(dir, { recursive: true, force: true });
});

t.test('a session larger than a message comes back whole, in order, in pages under max_payload', async (t) => {
  const base = Date.now() - 86_400_000;
  // 100 heartbeats of about 2 KB each: some 200 KB, four pages or more.
  const events = Array.from({ length: 100 }, (_, i) =>
    eventAt(i === 0 ? 'play_start' : 'heartbeat', base + i * 10_000, {
      event_id: `h${i}`,
      properties: { note: 'x'.repeat(2000) },
    }),
  );
  await insertEvents(store.client, TsvLines.of(events.map((e, i) => eventLine(e, 10 + i, 0))), 'history-pages');
  const req = { tenant: 'acme', sessions: ['s1'], before_seq: 1000, received_before: 0, stored_through: 0 };

  const first = await bus.nc.request(
    bus.names.historySubject,
    new TextEncoder().encode(JSON.stringify({ ...req, offset: 0 })),
    { timeout: 10_000 },
  );
  const answer = JSON.parse(new TextDecoder().decode(first.data)) as HistoryAnswer;
  t.ok(first.data.length <= 65536, `the first page is ${first.data.length} bytes`);
  if ('error' in answer) throw new Error(answer.error);
  t.ok(answer.events.length > 0 && answer.events.length < 100, `${answer.events.length} events in it`);
  t.equal(answer.next, answer.events.length, 'the next page starts after them');

  const all = await recallSessions(bus, req, () => false, log);
  t.same(
    all.map((e) => e.event_id),
    events.map((e) => e.event_id),
    'every event, in the order it was read',
  );
  t.equal((all[99]!.properties as { note: string }).note.length, 2000);
});

t.test('a request that names no raw-stream sequence is answered with an error that says so', async (t) => {
  const reply = await bus.nc.request(
    bus.names.historySubject,
    new TextEncoder().encode(
      JSON.stringify({
        tenant: 'acme',
        sessions: ['s1'],
        before_seq: 1,
        received_before: 0,
        stored_through: -1,
        offset: 0,
      }),
    ),
    { timeout: 10_000 },
  );
  t.same(JSON.parse(new TextDecoder().decode(reply.data)), {
    error: 'stored_through must be a raw-stream sequence, not -1',
  });
});
