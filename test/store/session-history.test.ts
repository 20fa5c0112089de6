import t from 'tap';
import type { WireEvent } from '../../src/bus/wire.js';
import { createLogger } from '../../src/log.js';
import { eventLine, insertEvents, sessionHistory } from '../../src/store/events.js';
import { TsvLines } from '../../src/store/tsv.js';
import type { HistoryRequest } from '../../src/contracts/history.js';
import { migrate } from '../../src/store/migrate.js';
import { eventAt } from '../helpers/pipeline.js';
import { embeddedClient } from '../helpers/store.js';

// What an aggregator gets back for a late event's sessions (docs/aggregation.md "Late events for a session no longer
// in memory"): their session events read before a given input message, in the order they were read, a page at a time;
// and the skip index that finds them.

const log = createLogger('silent');
const client = await embeddedClient(t, 'history');

const base = Date.now() - 3 * 86_400_000;
const at = (s: number, type: string, session: string, extra: Partial<WireEvent> = {}): WireEvent =>
  eventAt(type, base + s * 1000, {
    session_id: session,
    event_id: `${session}-${s}-${type}`,
    received_at: base + s * 1000,
    ...extra,
  });

t.test('a session\u2019s events read before an input message, in reading order, page by page', async (t) => {
  await migrate(client, log);
  // (event, ingest seq, index): s1 read in messages 3, 5 and 9, its play_start late (message 5, index 1).
  const rows: Array<[WireEvent, number, number]> = [
    [
      at(10, 'first_frame', 's1', {
        context: { pop: 'bom1', cdn: 'akamai', app_version: '2.1', player: 'shaka', os: 'tv' },
      }),
      3,
      0,
    ],
    [at(20, 'heartbeat', 's1'), 3, 1],
    [at(0, 'play_start', 's2'), 3, 2],
    [at(30, 'heartbeat', 's1'), 5, 0],
    [at(0, 'play_start', 's1'), 5, 1],
    [at(5, 'custom', 's1'), 5, 2],
    [at(40, 'pause', 's1'), 9, 0],
    [at(10, 'heartbeat', 's1', { tenant: 'other' }), 4, 0],
  ];
  await insertEvents(client, TsvLines.of(rows.map(([e, seq, i]) => eventLine(e, seq, i))), 'history-test');
  const [index] = await (
    await client.query({
      query: "SELECT type FROM system.data_skipping_indices WHERE table = 'events' AND name = 'session_idx'",
      format: 'JSONEachRow',
    })
  ).json<{ type: string }>();
  t.equal(index?.type, 'bloom_filter');

  const ask = (req: Partial<HistoryRequest>, limit = 100): Promise<string[]> =>
    sessionHistory(
      client,
      { tenant: 'acme', sessions: ['s1'], before_seq: 9, received_before: 0, offset: 0, ...req },
      limit,
    ).then((events) => events.map((e) => `${e.session_id}:${e.event_type}@${(e.ts - base) / 1000}`));
  t.same(
    await ask({}),
    ['s1:first_frame@10', 's1:heartbeat@20', 's1:heartbeat@30', 's1:play_start@0'],
    'read before message 9, in reading order; not the custom event',
  );
  t.same(
    await ask({ before_seq: 5 }),
    ['s1:first_frame@10', 's1:heartbeat@20'],
    'before message 5: what the shard had read then, whatever came after',
  );
  t.same(await ask({ sessions: ['s1', 's2'], before_seq: 4 }), [
    's1:first_frame@10',
    's1:heartbeat@20',
    's2:play_start@0',
  ]);
  t.same(
    await ask({ before_seq: 1, received_before: base + 25_000 }),
    ['s1:first_frame@10', 's1:heartbeat@20', 's1:play_start@0'],
    'received long before: a stream made again restarts its sequences',
  );
  t.same(await ask({ offset: 1 }, 2), ['s1:heartbeat@20', 's1:heartbeat@30'], 'a page');
  t.same(await ask({ tenant: 'other' }), ['s1:heartbeat@10'], 'per tenant');
  const [e] = await sessionHistory(
    client,
    { tenant: 'acme', sessions: ['s1'], before_seq: 4, received_before: 0, offset: 0 },
    1,
  );
  t.same(
    e,
    {
      ...at(10, 'first_frame', 's1'),
      client_ts: null,
      // The context keys the aggregator reads: a session's attributes and its segments' CDN.
      context: { pop: 'bom1', cdn: 'akamai', app_version: '2.1', player: 'shaka' },
      properties: {},
      anonymous_id: undefined,
      user_id: undefined,
      content_id: undefined,
      content_type: undefined,
      content_title: undefined,
      position_sec: undefined,
      bitrate_kbps: undefined,
    },
    'the event as the pipelines saw it',
  );
});
