import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** A part directory's name: partition, first and last block, level, and a mutation (partition ids have no `_`). */
const partName = /^([^_]+)_(\d+)_(\d+)_\d+(?:_\d+)?$/;

interface Blocks {
  partition: string;
  min: number;
  max: number;
}

function blocksOf(name: string): Blocks | null {
  const m = partName.exec(name);
  return m ? { partition: m[1]!, min: Number(m[2]), max: Number(m[3]) } : null;
}

/**
 * ClickHouse's MergeTree (without replication) records an insert's de-duplication token in the table's
 * `deduplication_logs/` before it commits the insert's part. A process killed between the two leaves the token
 * without its rows: the flusher's retry of the insert, under the same token, is then taken for a duplicate and
 * ignored, and the rows are lost. (The chaos soak lost a group's `qos_minutes` rows so, and metrics-distributed a
 * `session_hours` row.) Run before the embedded store opens: each table's log loses the records of parts that are in
 * no part on disk, so those inserts are stored when they come again. A record of a part merged or mutated since is
 * kept: the new part's block range covers it. The count of records removed is returned.
 */
export function forgetUncommittedTokens(storePath: string): number {
  let removed = 0;
  for (const table of tableDirs(storePath)) removed += repairTable(table, storePath);
  return removed;
}

/** Directories holding a `deduplication_logs` folder: chDB's tables (`store/abc/<uuid>/`, or `data/<db>/<table>/`). */
function tableDirs(root: string, depth = 0): string[] {
  let entries;
  try {
    entries = readdirSync(root, { withFileTypes: true });
  } catch {
    return [];
  }
  if (entries.some((e) => e.isDirectory() && e.name === 'deduplication_logs')) return [root];
  if (depth === 3) return [];
  return entries.filter((e) => e.isDirectory()).flatMap((e) => tableDirs(join(root, e.name), depth + 1));
}

function repairTable(dir: string, storePath: string): number {
  const parts = readdirSync(dir).flatMap((n) => blocksOf(n) ?? []);
  const committed = (name: string): boolean => {
    const b = blocksOf(name);
    return b !== null && parts.some((p) => p.partition === b.partition && p.min <= b.min && b.max <= p.max);
  };
  let removed = 0;
  const logs = join(dir, 'deduplication_logs');
  for (const file of readdirSync(logs).filter((f) => /^deduplication_log_\d+\.txt$/.test(f))) {
    const path = join(logs, file);
    const lines = readFileSync(path, 'utf8').split('\n');
    // `1 <tab> part <tab> block id` adds a token; other operations (2: a part dropped) stay as they are.
    const kept = lines.filter((line) => {
      const [op, part] = line.split('\t');
      return op !== '1' || part === undefined || committed(part);
    });
    if (kept.length === lines.length) continue;
    removed += lines.length - kept.length;
    // Written beside the store, not in the log's folder, where ClickHouse reads every file as a log.
    const tmp = join(storePath, 'deduplication-log.repair');
    const fd = openSync(tmp, 'w');
    writeSync(fd, kept.join('\n'));
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, path);
  }
  return removed;
}
