import {
  closeSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
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
  // Another process's store is left alone (the engine then refuses to open it): its logs are being written.
  if (heldByOther(storePath)) return 0;
  let removed = 0;
  for (const table of tableDirs(storePath)) removed += repairTable(table, storePath);
  return removed;
}

/** The process that has the store open, by pid: the engine's own lock is not one Node can test. */
const ownerFile = (storePath: string): string => join(storePath, 'darshak-owner.pid');

function heldByOther(storePath: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(ownerFile(storePath), 'utf8'));
  } catch {
    return false;
  }
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // Gone (a crash left the file): the store is free. EPERM: alive, another user's.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Say that this process has the store open (once the engine opened it). */
export function markOwner(storePath: string): void {
  writeFileSync(ownerFile(storePath), String(process.pid));
}

/** The store is closed: no longer this process's. */
export function clearOwner(storePath: string): void {
  try {
    if (readFileSync(ownerFile(storePath), 'utf8') === String(process.pid)) unlinkSync(ownerFile(storePath));
  } catch {
    // Not there: nothing to clear.
  }
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

/**
 * Whether a part on disk covers a part name's blocks. Per partition, the parts sorted by first block with the
 * furthest last block so far: a log holds up to twice the de-duplication window of records, and a busy table hundreds
 * of parts, so each record is one binary search, not a scan of the parts.
 */
export function coverage(dir: string): (name: string) => boolean {
  const byPartition = new Map<string, Blocks[]>();
  for (const b of readdirSync(dir).flatMap((n) => blocksOf(n) ?? [])) {
    const list = byPartition.get(b.partition);
    if (list) list.push(b);
    else byPartition.set(b.partition, [b]);
  }
  const index = new Map<string, { mins: number[]; furthest: number[] }>();
  for (const [partition, list] of byPartition) {
    list.sort((a, b) => a.min - b.min);
    let furthest = -1;
    index.set(partition, {
      mins: list.map((b) => b.min),
      furthest: list.map((b) => (furthest = Math.max(furthest, b.max))),
    });
  }
  return (name) => {
    const b = blocksOf(name);
    const parts = b && index.get(b.partition);
    if (!b || !parts) return false;
    // The last part starting at or before the record's first block.
    let lo = 0;
    let hi = parts.mins.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (parts.mins[mid]! <= b.min) lo = mid + 1;
      else hi = mid;
    }
    return lo > 0 && parts.furthest[lo - 1]! >= b.max;
  };
}

function repairTable(dir: string, storePath: string): number {
  const committed = coverage(dir);
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
    const tmp = join(storePath, `deduplication-log.${process.pid}.repair`);
    const fd = openSync(tmp, 'w');
    writeSync(fd, kept.join('\n'));
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, path);
  }
  return removed;
}
