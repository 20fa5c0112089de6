import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { Store } from '../../src/store/store.js';
import { insertTsv, TsvLines } from '../../src/store/tsv.js';
import { coverage } from '../../src/store/uncommitted-tokens.js';
import { root } from '../helpers/env.js';

// ClickHouse records an insert's de-duplication token before it commits the insert's part; a store killed between
// the two kept the token without the rows, and the flusher's retry under that token was ignored (bench/store-crash.ts
// reproduces it with kill -9; the soak lost a table's rows so). Here the state such a kill leaves is made exactly:
// a token in a table's log whose part was never committed. The store, opened again, must store that insert.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-tokens-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const config = { clickhouse_url: '', data_dir: dataDir, events_retention_days: 30 };

const rows = (...values: number[]): TsvLines => {
  const lines = new TsvLines();
  for (const v of values) lines.push(`${v}\n`);
  return lines;
};

/** In another process (the embedded engine is one per process): two tables, `t` holding insert `a`, `probe` insert `b`. */
async function prepare(): Promise<{ t: string; probe: string }> {
  const script = `
    import { Store } from ${JSON.stringify(`${root}dist/src/store/store.js`)};
    import { createLogger } from ${JSON.stringify(`${root}dist/src/log.js`)};
    import { insertTsv, TsvLines } from ${JSON.stringify(`${root}dist/src/store/tsv.js`)};
    const store = await Store.open(${JSON.stringify(config)}, createLogger('silent'));
    const rows = (...vs) => { const l = new TsvLines(); for (const v of vs) l.push(v + '\\n'); return l; };
    for (const name of ['t', 'probe']) await store.client.command({ query: \`CREATE TABLE \${name} (i UInt32) ENGINE = MergeTree ORDER BY i SETTINGS non_replicated_deduplication_window = 1000\` });
    await insertTsv(store.client, 't', ['i'], rows(1, 2, 3), 'a');
    await insertTsv(store.client, 'probe', ['i'], rows(4, 5, 6), 'b');
    const paths = await (await store.client.query({ query: "SELECT name, data_paths[1] AS path FROM system.tables WHERE database = currentDatabase() AND name IN ('t', 'probe')", format: 'JSONEachRow' })).json();
    console.log(JSON.stringify(Object.fromEntries(paths.map((p) => [p.name, p.path]))));
    await store.close();`;
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`setup exited ${code}`))));
  });
  return JSON.parse(out.trim().split('\n').pop()!) as { t: string; probe: string };
}

const logOf = (table: string): string => {
  const dir = join(table, 'deduplication_logs');
  return join(
    dir,
    readdirSync(dir)
      .filter((f) => f.endsWith('.txt'))
      .sort()
      .pop()!,
  );
};

t.test(
  'an insert whose token was recorded but whose part was never committed is stored when written again',
  async (t) => {
    const paths = await prepare();
    // `b`'s block id as ClickHouse makes it (the partition and the token's hash), from the table that holds it.
    const [, , blockB] = readFileSync(logOf(paths.probe), 'utf8').trim().split('\t');
    t.match(blockB, /^all_\d+_\d+$/, "the probe's log names insert b");
    // What a kill -9 between the token and the commit of `b` into `t` leaves: the next block's part, never renamed.
    appendFileSync(logOf(paths.t), `1\tall_2_2_0\t${blockB}\n`);

    const store = await Store.open(config, createLogger('silent'));
    t.teardown(() => store.close());
    const count = async (): Promise<number> =>
      Number(
        (
          await (
            await store.client.query({ query: 'SELECT count() AS n FROM t', format: 'JSONEachRow' })
          ).json<{ n: string }>()
        )[0]!.n,
      );
    await insertTsv(store.client, 't', ['i'], rows(4, 5, 6), 'b');
    t.equal(await count(), 6, 'insert b, written again under its token, is stored');
    await insertTsv(store.client, 't', ['i'], rows(1, 2, 3), 'a');
    await insertTsv(store.client, 't', ['i'], rows(4, 5, 6), 'b');
    t.equal(await count(), 6, 'and inserts a and b, committed, are still taken for duplicates');

    // While this process has the store open, an insert's token may stand in the log before its part is committed: a
    // second process, refused by the engine, must not have "repaired" the log on its way.
    const inFlight = `1\tall_99_99_0\tall_1_1\n`;
    appendFileSync(logOf(paths.t), inFlight);
    const script = `
    import { Store } from ${JSON.stringify(`${root}dist/src/store/store.js`)};
    import { createLogger } from ${JSON.stringify(`${root}dist/src/log.js`)};
    try { await Store.open(${JSON.stringify(config)}, createLogger('silent')); console.log('opened'); } catch (err) { console.log(err.message); }`;
    const out = await new Promise<string>((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.on('close', () => resolve(text));
    });
    t.match(out, /another process is using it/, 'a second process is refused');
    t.ok(readFileSync(logOf(paths.t), 'utf8').endsWith(inFlight), "and left the first one's log as it was");
  },
);

t.test(
  'a part name is committed when a part on disk covers its blocks: merged, mutated, outdated beside active',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'darshak-parts-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    // An outdated merge (1-20) beside the active one that replaced it (1-40), a mutated part, another partition, and
    // what is not a part.
    for (const name of [
      '202611_1_20_2',
      '202611_1_40_3',
      '202611_41_41_0_57',
      '202611_45_45_0',
      '202612_3_3_0',
      'tmp_insert_202611_46_46_0',
      'detached',
      'format_version.txt',
    ]) {
      mkdirSync(join(dir, name));
    }
    const committed = coverage(dir);
    const cases: Array<[string, boolean]> = [
      ['202611_5_5_0', true],
      ['202611_21_21_0', true],
      ['202611_40_40_0', true],
      ['202611_41_41_0', true],
      ['202611_42_42_0', false],
      ['202611_45_45_0', true],
      ['202611_46_46_0', false],
      ['202611_1_41_4', false],
      ['202612_3_3_0', true],
      ['202612_4_4_0', false],
      ['202610_1_1_0', false],
      ['garbage', false],
    ];
    t.same(
      cases.map(([name]) => [name, committed(name)]),
      cases,
    );
  },
);
