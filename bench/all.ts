// npm run bench [-- --only a,b] [--skip a,b]: every `bench:*` script of package.json, one after another, each
// printing as it runs; then a row each, with the machine, the commit, the time and the command, goes into
// bench/RESULTS.md between the "latest full run" markers and their whole output into bench/latest-run.md, replacing
// those scripts' entries and keeping the others' (and RESULTS.md's notes around the markers).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('../../', import.meta.url));
const resultsFile = `${root}bench/RESULTS.md`;
/** Each script's whole output, beside the table in RESULTS.md that names them. */
const outputFile = `${root}bench/latest-run.md`;
const begin = '<!-- latest full run: written by `npm run bench` -->';
const end = '<!-- end of the latest full run -->';

const { values } = parseArgs({
  options: { only: { type: 'string' }, skip: { type: 'string' } },
  strict: true,
  allowPositionals: false,
});
const list = (v: string | undefined): string[] =>
  v
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : [];
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { scripts: Record<string, string> };
const all = Object.keys(pkg.scripts)
  .filter((s) => s.startsWith('bench:'))
  .map((s) => s.slice('bench:'.length));
const only = list(values.only);
const skip = new Set(list(values.skip));
for (const name of [...only, ...skip])
  if (!all.includes(name)) throw new Error(`no script bench:${name}; there are ${all.join(', ')}`);
const chosen = (only.length > 0 ? only : all).filter((n) => !skip.has(n));

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '?';
  }
}

const natsBin = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
const machine = `${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}, ${process.platform}; nats-server ${sh(natsBin, ['--version']).replace(/^nats-server:\s*/, '')}`;
// RESULTS.md itself is not a change to what is measured.
const dirty =
  sh('git', ['status', '--porcelain', '--', '.', ':!bench/RESULTS.md']) !== '' ? ' (with uncommitted changes)' : '';
const commit = `${sh('git', ['rev-parse', '--short', 'HEAD'])}${dirty}`;

interface Ran {
  name: string;
  code: number | null;
  seconds: number;
  output: string;
  load: string;
}

function runOne(name: string): Promise<Ran> {
  return new Promise((resolve) => {
    const started = Date.now();
    const load = loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    console.log(`\n=== npm run bench:${name} (load average ${load})`);
    const child = spawn('npm', ['run', '--silent', `bench:${name}`], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (d: Buffer): void => {
      process.stdout.write(d);
      output += d.toString();
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('close', (code) => resolve({ name, code, seconds: (Date.now() - started) / 1000, output, load }));
  });
}

const ran: Ran[] = [];
for (const name of chosen) ran.push(await runOne(name));

const when = new Date().toISOString();
interface Entry {
  row: string;
  details: string;
}

/**
 * The entries of the last run's table (RESULTS.md) and their outputs (latest-run.md), by script, so that a run of
 * some scripts keeps the others'.
 */
function previous(table: string, outputs: string): Map<string, Entry> {
  const entries = new Map<string, Entry>();
  for (const m of table.matchAll(/^\| ([a-z0-9-]+) \| `npm run bench:[^|]*\|.*$/gm)) {
    const details =
      new RegExp(`<details><summary>bench:${m[1]} output</summary>[\\s\\S]*?</details>`).exec(outputs)?.[0] ?? '';
    entries.set(m[1]!, { row: m[0], details });
  }
  return entries;
}

const current = readFileSync(resultsFile, 'utf8');
const at = current.indexOf(begin);
const entries =
  at >= 0
    ? previous(current.slice(at, current.indexOf(end)), existsSync(outputFile) ? readFileSync(outputFile, 'utf8') : '')
    : new Map<string, Entry>();
for (const r of ran) {
  entries.set(r.name, {
    row: `| ${r.name} | \`npm run bench:${r.name}\` | ${r.code} | ${(r.seconds / 60).toFixed(1)} | ${r.load} | ${when} | \`${commit}\` |`,
    details: [
      `<details><summary>bench:${r.name} output</summary>`,
      '',
      '```',
      r.output.trimEnd(),
      '```',
      '',
      '</details>',
    ].join('\n'),
  });
}
const order = [...all.filter((n) => entries.has(n))];
const section = [
  begin,
  `## Latest runs of every benchmark (\`npm run bench\`; last written ${when})`,
  '',
  `**Machine:** ${machine}.`,
  '',
  '| script | command | exit | minutes | load average before | run at | commit |',
  '|---|---|---|---:|---|---|---|',
  ...order.map((n) => entries.get(n)!.row),
  '',
  'Each script\u2019s whole output: [latest-run.md](latest-run.md).',
  end,
].join('\n');
const outputs = [
  '# Latest output of each benchmark',
  '',
  'Written by `npm run bench` (bench/all.ts) beside the table of the same runs in [RESULTS.md](RESULTS.md); a run of',
  'some scripts replaces their outputs and keeps the others\u2019.',
  '',
  ...order.flatMap((n) => [entries.get(n)!.details, '']),
].join('\n');

const next =
  at >= 0
    ? `${current.slice(0, at)}${section}${current.slice(current.indexOf(end) + end.length)}`
    : current.replace(/^(# [^\n]*\n)/, `$1\n${section}\n`);
writeFileSync(resultsFile, next);
writeFileSync(outputFile, outputs);
console.log(
  `\nwritten to bench/RESULTS.md and bench/latest-run.md: ${ran.map((r) => `${r.name} (exit ${r.code})`).join(', ')}`,
);
if (ran.some((r) => r.code !== 0)) process.exitCode = 1;
