import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import type { OracleEvent } from '../../bench/simulator/oracle.js';
import { tableRows } from './docs.js';

// Reading an export back with an independent Parquet reader (hyparquet), and comparing it with the events sent.

/** The columns of the file, in order: the table in docs/export.md, what users are promised. */
export const columns = tableRows('docs/export.md', 'column').map((row) => row[0]!);

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => [k, sorted(v)]),
  );
}

/** One line per event of the fields the scenario decides; the checksum is over the sorted lines. */
export function line(e: OracleEvent): string {
  return JSON.stringify([
    e.tenant,
    e.event_type,
    e.ts,
    e.event_id ?? '',
    e.session_id ?? '',
    e.user_id ?? '',
    e.anonymous_id ?? '',
    e.content_id ?? '',
    e.content_type ?? '',
    e.content_title ?? '',
    e.position_sec ?? null,
    e.bitrate_kbps ?? null,
    e.context?.pop ?? '',
    sorted(e.properties ?? {}),
  ]);
}

export type ParquetRow = Record<string, unknown>;

export function rowLine(r: ParquetRow): string {
  const str = (k: string) => r[k] as string;
  return line({
    tenant: str('tenant'),
    event_type: str('event_type'),
    ts: (r.ts as Date).getTime(),
    event_id: str('event_id'),
    session_id: str('session_id'),
    user_id: str('user_id'),
    anonymous_id: str('anonymous_id'),
    content_id: str('content_id'),
    content_type: str('content_type'),
    content_title: str('content_title'),
    position_sec: (r.position_sec as number | null) ?? undefined,
    bitrate_kbps: (r.bitrate_kbps as number | null) ?? undefined,
    context: { pop: str('pop') },
    properties: JSON.parse(str('properties')) as Record<string, unknown>,
  });
}

export const checksum = (lines: string[]): string => createHash('sha256').update(lines.sort().join('\n')).digest('hex');

/** Fetch a link, keep the file under `dir`, and read it: the answer, the rows, the column names. */
export async function downloadParquet(
  url: string,
  dir: string,
): Promise<{ res: Response; rows: ParquetRow[]; names: string[] }> {
  const res = await fetch(url);
  const bytes = Buffer.from(await res.arrayBuffer());
  const path = join(dir, `download-${createHash('sha1').update(url).digest('hex')}.parquet`);
  writeFileSync(path, bytes);
  const file = await asyncBufferFromFile(path);
  const meta = await parquetMetadataAsync(file);
  return {
    res,
    rows: (await parquetReadObjects({ file })) as ParquetRow[],
    names: meta.schema.slice(1).map((s) => s.name),
  };
}
