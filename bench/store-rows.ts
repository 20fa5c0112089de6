// What one stored row costs the embedded store (npm run bench:store-rows), for the capacity budget (issue 58):
// `events` rows (eventLine, as the flush role builds them) and `session_hours` rows (the audience pipeline's, through
// the snapshot writer), inserted with the flush role's own code in inserts of several sizes. Prints, per table and
// insert size, the process's CPU per row (every thread: chDB parses, sorts, compresses and merges in this process)
// while inserting and including the merges that follow, and the JavaScript share of building the rows (`events`:
// the whole TabSeparated line; `session_hours`: the pipeline's rows, whose lines are built inside the insert). Sizes are
// alternated, each run three times, and the medians printed.
//
//   npm run bench:store-rows [-- --rows 200000 --sizes 100,5000,50000]

import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { audience, sessionHours } from '../pipelines/audience/pipeline.js';
import { Accumulator } from '../src/aggregate/accumulator.js';
import { noAttrs } from '../src/aggregate/runtime.js';
import { createLogger } from '../src/log.js';
import type { Cell } from '../src/metric/pipeline.js';
import { eventLine, insertEvents } from '../src/store/events.js';
import { TsvLines } from '../src/store/tsv.js';
import { insertSnapshotRows } from '../src/store/snapshots.js';
import { Store } from '../src/store/store.js';
import { gitCommit } from './host.js';

const { values } = parseArgs({
  options: { rows: { type: 'string' }, sizes: { type: 'string' } },
  strict: true,
});
const rows = Number(values.rows ?? 200_000);
const sizes = (values.sizes ?? '100,5000,50000').split(',').map(Number);
if (!(rows >= 1000) || sizes.some((s) => !(s >= 1 && s <= rows)))
  throw new Error('--rows takes at least 1000, --sizes sizes from 1 to --rows');

const regions = ['Maharashtra', 'Delhi', 'Karnataka', 'Tamil Nadu'];
const now = Date.now();

/** The i-th heartbeat of the bench's 100,000 viewers, as the flush role's line. */
const eventRow = (i: number, seq: number): string => {
  const v = i % 100_000;
  return eventLine(
    {
      tenant: 'acme',
      env: 'production',
      event_type: 'heartbeat',
      ts: now + i,
      client_ts: null,
      received_at: now + i,
      session_id: `v${v}-1`,
      anonymous_id: `a${v}`,
      content_id: 'ind-vs-aus-final',
      position_sec: i % 7200,
      bitrate_kbps: 4500,
      country: 'IN',
      region: regions[v % 4]!,
      device: 'mobile',
      context: { cdn: `cdn-${v % 3}`, pop: `pop-${v % 7}` },
    },
    seq,
    i % 500,
  );
};

/** Snapshots of sessions [from, from + n), as the audience pipeline puts them (through the runtime's accumulator). */
function sessionRows(from: number, n: number, version: number): Cell[][] {
  const acc = new Accumulator();
  for (let i = from; i < from + n; i++) {
    const v = i % 100_000;
    const attrs = {
      ...noAttrs('acme', `v${v}-1`),
      viewer: `a${v}`,
      content_id: 'ind-vs-aus-final',
      region: regions[v % 4]!,
      country: 'IN',
      pop: `pop-${v % 7}`,
      device: 'mobile',
      furthest_sec: i % 7200,
    };
    audience.snapshot!({ attrs, first_ts: now, last_ts: now + i, events: i }, acc);
  }
  return acc.drain(version).rows.get(sessionHours.name) ?? [];
}

interface Result {
  insertUs: number;
  withMergesUs: number;
  buildUs: number;
}

const cpuUs = (): number => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

async function once(table: 'events' | 'session_hours', size: number): Promise<Result> {
  const dir = mkdtempSync(join(tmpdir(), 'darshak-bench-store-rows-'));
  const store = await Store.open(
    { clickhouse_url: '', data_dir: dir, events_retention_days: 365 },
    createLogger('warn'),
  );
  try {
    let build = 0;
    const start = cpuUs();
    for (let done = 0, seq = 1; done < rows; done += size, seq++) {
      const b0 = cpuUs();
      const n = Math.min(size, rows - done);
      if (table === 'events') {
        const lines = Array.from({ length: n }, (_, k) => eventRow(done + k, seq));
        build += cpuUs() - b0;
        await insertEvents(store.client, TsvLines.of(lines), `bench:${seq}`);
      } else {
        const cells = sessionRows(done, n, seq);
        build += cpuUs() - b0;
        await insertSnapshotRows(store.client, sessionHours, cells, `bench:${seq}`);
      }
    }
    const inserted = cpuUs();
    // The merges the inserts started: until none runs (at least 3 s, at most 30).
    for (let s = 0; s < 30; s++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const [m] = await (
        await store.client.query({ query: 'SELECT count() AS n FROM system.merges', format: 'JSONEachRow' })
      ).json<{ n: string }>();
      if (s >= 2 && Number(m?.n) === 0) break;
    }
    const merged = cpuUs();
    return { insertUs: (inserted - start) / rows, withMergesUs: (merged - start) / rows, buildUs: build / rows };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

console.log(
  `Store cost per row: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, Node ${process.version}, embedded chDB; commit ${gitCommit()}; ${rows.toLocaleString('en-US')} rows per run`,
);
console.log(
  '| table | rows per insert | µs CPU per row, inserting | with the merges after | of which building lines in JS |',
);
console.log('|---|---:|---:|---:|---:|');
for (const table of ['events', 'session_hours'] as const) {
  const runs = new Map<number, Result[]>(sizes.map((s) => [s, []]));
  for (let round = 0; round < 3; round++) for (const size of sizes) runs.get(size)!.push(await once(table, size));
  for (const [size, rs] of runs) {
    const m = (k: keyof Result): string => median(rs.map((r) => r[k])).toFixed(1);
    console.log(
      `| ${table} | ${size.toLocaleString('en-US')} | ${m('insertUs')} | ${m('withMergesUs')} | ${m('buildUs')} |`,
    );
  }
}
process.exit(0);
