import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { select } from '../../src/store/queries/range.js';
import { Store } from '../../src/store/store.js';
import {
  cli,
  drained,
  eventually,
  freePort,
  makeTenant,
  ready,
  removeNamespace,
  RoleProcesses,
  uniquePrefix,
} from '../helpers/env.js';

// Past its capacity the service degrades, never collapses (docs/ingest.md, "Overload"): one `darshak start` driven
// by more than it can follow. Ingest sheds with 503 ingest_overloaded and Retry-After (never another 5xx, never a
// broken connection), the pipeline's lag stays bounded, no consumer rebuilds because it is busy, the backlog drains
// once the load stops, and the store holds exactly the events that were answered accepted, each once.

t.setTimeout(300_000);

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('driven past its capacity, one service sheds, stays bounded, drains, and loses nothing accepted', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const tenant = await makeTenant(prefix, 'final', 'enterprise');
  await cli(['tenant', 'update', '--slug', 'final', '--rate-per-minute', '1000000000'], { NATS_PREFIX: prefix });
  const dir = mkdtempSync(join(tmpdir(), 'darshak-overload-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [ingestPort, basePort] = [await freePort(), await freePort()];
  // A low target, so that a few seconds of overload engage the shedding on any machine.
  const shed = { INGEST_SHED_LAG_MS: '1000', INGEST_SHED_MAX_LAG_MS: '5000' };
  const procs = new RoleProcesses(
    { NATS_PREFIX: prefix, DATA_DIR: dir, INGEST_PORT: String(ingestPort), BASE_PORT: String(basePort), ...shed },
    t,
  );
  t.teardown(() => procs.stopAll());
  const service = procs.start([]);
  const ingestUrl = `http://127.0.0.1:${ingestPort}`;
  t.ok(await ready(ingestUrl, 60_000), 'started');

  const accepted = new Set<string>();
  const statuses: Record<string, number> = {};
  const retryAfter = new Set<string>();
  const problems: string[] = [];
  let maxLag = 0;
  let maxLoop = 0;
  let running = true;
  let n = 0;
  const sender = async (): Promise<void> => {
    while (running) {
      const ids = Array.from({ length: 500 }, () => randomUUID());
      const base = n++ * 500;
      const events = ids.map((id, i) =>
        i % 10 === 0
          ? {
              event_type: 'play_start',
              event_id: id,
              session_id: `s${base + i}`,
              anonymous_id: `a${base + i}`,
              content_id: 'final',
              context: { region: 'Delhi', country: 'IN', device_type: 'tv' },
            }
          : { event_type: 'heartbeat', event_id: id, session_id: `s${base + i - (i % 10)}`, position_sec: i },
      );
      try {
        const res = await fetch(`${ingestUrl}/v1/ingest/events`, {
          method: 'POST',
          headers: { 'x-api-key': tenant.key, 'content-type': 'application/json' },
          body: JSON.stringify({ events }),
        });
        const body = (await res.json()) as {
          accepted?: number;
          errors?: Array<{ index: number }>;
          error?: { code: string };
        };
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        if (res.status === 200) {
          const refused = new Set((body.errors ?? []).map((e) => e.index));
          ids.forEach((id, i) => !refused.has(i) && accepted.add(id));
        } else if (res.status === 503 && body.error?.code === 'ingest_overloaded') {
          retryAfter.add(res.headers.get('retry-after') ?? 'none');
        } else problems.push(`${res.status} ${JSON.stringify(body).slice(0, 200)}`);
      } catch (err) {
        problems.push(`no answer: ${(err as Error).message}`);
      }
    }
  };
  const watcher = async (): Promise<void> => {
    while (running) {
      const text = await (await fetch(`${ingestUrl}/metrics`)).text().catch(() => '');
      maxLag = Math.max(maxLag, Number(/^darshak_ingest_pipeline_lag_seconds (\S+)$/m.exec(text)?.[1] ?? 0));
      maxLoop = Math.max(
        maxLoop,
        Number(/^darshak_process_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1] ?? 0),
      );
      await pause(250);
    }
  };
  const load = [...Array.from({ length: 8 }, () => sender()), watcher()];
  await pause(25_000);
  running = false;
  await Promise.all(load);

  t.same(
    problems.slice(0, 5),
    [],
    'every answer is 200 or 503 ingest_overloaded: no other error, no broken connection',
  );
  t.ok((statuses[503] ?? 0) > 0, `load was past capacity: ${JSON.stringify(statuses)}`);
  t.ok(accepted.size > 10_000, `and accepted what the pipeline follows meanwhile: ${accepted.size} events`);
  t.ok(
    [...retryAfter].every((s) => Number(s) >= 1 && Number(s) <= 30),
    `Retry-After on every 503: ${[...retryAfter].join(', ')} s`,
  );
  // Shedding admits nothing from 5 s of lag; what was admitted just before, and a second of measuring, on top.
  t.comment(`longest event-loop delay seen: ${maxLoop.toFixed(2)} s`);
  t.ok(maxLag < 15, `the lag stayed bounded: at most ${maxLag.toFixed(1)} s`);

  t.not(await eventually(() => drained(prefix), 120_000, 500), -1, 'the backlog drains once the load stops');
  t.notMatch(procs.logs(), /rebuilding|consumer lost/, 'no consumer timed out or rebuilt for being busy');
  await procs.stop(service, 'SIGTERM');
  const store = await Store.open(
    { clickhouse_url: '', data_dir: dir, events_retention_days: 30 },
    createLogger('silent'),
  );
  const stored = (
    await select<{ event_id: string }>(store.client, "SELECT event_id FROM events WHERE tenant = 'final'", {})
  ).map((r) => r.event_id);
  await store.close();
  const unique = new Set(stored);
  t.equal(unique.size, stored.length, 'no event stored twice');
  t.same(
    [...accepted].filter((id) => !unique.has(id)).slice(0, 5),
    [],
    `every accepted event stored (${stored.length} stored, ${accepted.size} accepted)`,
  );
  t.same(stored.filter((id) => !accepted.has(id)).slice(0, 5), [], 'nothing stored that was not accepted');
});
