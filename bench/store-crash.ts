// npm run bench:store-crash -- [--kills 100] [--tables 8] [--dir D]
// The embedded store killed -9 while it writes, as the flusher does: a process inserts one block per table at once,
// round after round, each round under its own de-duplication token, and is killed at a random moment. After each
// kill the store is opened again and the round under way is written again under its tokens, as the flusher writes
// a group it had not acknowledged. Every round must then be stored exactly once in every table. Exits 1 otherwise.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createLogger } from '../src/log.js';
import { Store } from '../src/store/store.js';
import { insertTsv, TsvLines } from '../src/store/tsv.js';
import { sleep } from './host.js';

const rowsPerRound = 200;

const round = (i: number): TsvLines => {
  const lines = new TsvLines();
  for (let j = 0; j < rowsPerRound; j++) lines.push(`${i}\t${j}\n`);
  return lines;
};

const open = (dir: string): Promise<Store> =>
  Store.open({ clickhouse_url: '', data_dir: dir, events_retention_days: 30 }, createLogger('error'));

const writeRound = (store: Store, tables: number, i: number): Promise<unknown> =>
  Promise.all(
    Array.from({ length: tables }, (_, k) => insertTsv(store.client, `crash${k}`, ['i', 'j'], round(i), `round${i}`)),
  );

/** The writer: rounds from `from` on, for ever; "start i" before each. */
async function writer(dir: string, tables: number, from: number): Promise<void> {
  const store = await open(dir);
  for (let k = 0; k < tables; k++) {
    await store.client.command({
      query: `CREATE TABLE IF NOT EXISTS crash${k} (i UInt32, j UInt32) ENGINE = MergeTree ORDER BY (i, j) SETTINGS non_replicated_deduplication_window = 100000`,
    });
  }
  process.stdout.write('ready\n');
  for (let i = from; ; i++) {
    process.stdout.write(`start ${i}\n`);
    await writeRound(store, tables, i);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kills: { type: 'string', default: '100' },
      tables: { type: 'string', default: '8' },
      dir: { type: 'string' },
      writer: { type: 'string' },
      from: { type: 'string' },
    },
  });
  const tables = Number(values.tables);
  if (values.writer) return writer(values.writer, tables, Number(values.from));
  const kills = Number(values.kills);
  if (!(kills >= 1) || !(tables >= 1))
    throw new Error('usage: npm run bench:store-crash -- [--kills 100] [--tables 8] [--dir D]');
  const dir = values.dir ?? mkdtempSync(`${tmpdir()}/darshak-store-crash-`);
  const wrong: string[] = [];
  let next = 0;
  const started = Date.now();
  for (let n = 1; n <= kills; n++) {
    const child = spawn(
      process.execPath,
      [fileURLToPath(import.meta.url), '--writer', dir, '--tables', String(tables), '--from', String(next)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise((r) => child.once('exit', r));
    while (!out.includes('ready\n') && child.exitCode === null) await sleep(20);
    await sleep(200 + Math.random() * 800);
    child.kill('SIGKILL');
    await exited;
    const last = Math.max(next - 1, ...[...out.matchAll(/start (\d+)/g)].map((m) => Number(m[1])));
    const store = await open(dir);
    try {
      if (last >= next) await writeRound(store, tables, last);
      for (let k = 0; k < tables; k++) {
        const rows = await (
          await store.client.query({
            query: `SELECT i, count() AS n FROM crash${k} WHERE i BETWEEN ${next} AND ${last} GROUP BY i`,
            format: 'JSONEachRow',
          })
        ).json<{ i: number; n: string }>();
        const stored = new Map(rows.map((r) => [Number(r.i), Number(r.n)]));
        for (let i = next; i <= last; i++) {
          const got = stored.get(i) ?? 0;
          if (got !== rowsPerRound)
            wrong.push(`kill ${n}: table crash${k}, round ${i}: ${got} rows of ${rowsPerRound}`);
        }
      }
    } finally {
      await store.close();
    }
    console.log(`kill ${n}: rounds ${next}..${last} checked; ${wrong.length} wrong so far`);
    next = last + 1;
  }
  console.log(
    `${kills} kills -9 of a store writing ${tables} tables at once, ${next} rounds in ${((Date.now() - started) / 60_000).toFixed(1)} min: ${wrong.length === 0 ? 'every round stored exactly once' : `${wrong.length} rounds lost or doubled: ${wrong.slice(0, 10).join('; ')}`}`,
  );
  if (!values.dir) rmSync(dir, { recursive: true, force: true });
  if (wrong.length > 0) process.exitCode = 1;
}

await main();
