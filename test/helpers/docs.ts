import { readFileSync } from 'node:fs';
import { root } from './env.js';

// What the docs promise, read from them, so that tests check the code against the docs and not against a copy.

/** Rows of the first markdown table whose header starts with `header`: cells trimmed, backticks removed. */
export function tableRows(file: string, header: string): string[][] {
  const lines = readFileSync(`${root}${file}`, 'utf8').split('\n');
  const start = lines.findIndex((l) => l.startsWith(`| ${header} |`));
  if (start < 0) throw new Error(`${file} has no table headed "${header}"`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replace(/`/g, '')),
    );
  }
  return rows;
}
