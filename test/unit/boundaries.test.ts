import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import t from 'tap';
import { root } from '../helpers/env.js';

// Roles talk over NATS through src/contracts, and share src/metric and the infrastructure folders; a role's folder
// never imports another role's (docs/architecture.md). The exceptions left are listed, each with its reason, and an
// exception that no longer exists fails too, so the list only shrinks.

const roles = ['ingest', 'aggregate', 'flush', 'alerts', 'webhooks', 'api'];
const allowed: Record<string, string> = {
  'src/flush/replay.ts -> src/aggregate/runtime.ts': '`darshak replay` runs the aggregation runtime over stored events',
  'src/flush/replay.ts -> src/aggregate/session.ts': 'and ranks events as a shard does',
};

function files(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** Each relative import of a file, as a path from the repository's root (`.js` read as its `.ts` source). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/\bfrom\s+'(\.[^']+)'|\bimport\(\s*'(\.[^']+)'\s*\)/g)].map((m) =>
    normalize(join(dirname(file), (m[1] ?? m[2])!)).replace(/\.js$/, '.ts'),
  );
}

const roleOf = (path: string): string | undefined => roles.find((r) => path.startsWith(`src/${r}/`));

t.test("no role's folder imports another role's, but for the listed exceptions", async (t) => {
  const crossings: string[] = [];
  for (const role of roles) {
    for (const file of files(`src/${role}`)) {
      for (const target of importsOf(file)) {
        const other = roleOf(target);
        if (other !== undefined && other !== role) crossings.push(`${file} -> ${relative('.', target)}`);
      }
    }
  }
  t.same(
    crossings.filter((c) => !(c in allowed)),
    [],
    'imports across roles (move what they share to src/contracts or src/metric)',
  );
  t.same(
    Object.keys(allowed).filter((c) => !crossings.includes(c)),
    [],
    'exceptions listed that no longer exist',
  );
});

t.test('the contracts and the metric definitions import no role', async (t) => {
  for (const dir of ['src/contracts', 'src/metric']) {
    for (const file of files(dir))
      t.same(
        importsOf(file).filter((i) => roleOf(i) !== undefined),
        [],
        file,
      );
  }
});

t.test(
  'the control plane loads no pipeline: `darshak tenant create` needs none (thresholds are checked by their callers)',
  async (t) => {
    const reach = new Set<string>();
    const visit = (file: string): void => {
      if (reach.has(file)) return;
      reach.add(file);
      for (const i of importsOf(file)) if (i.startsWith('src/') || i.startsWith('pipelines/')) visit(i);
    };
    for (const file of files('src/control')) visit(file);
    t.same(
      [...reach].filter((f) => f.startsWith('pipelines/') || f.startsWith('src/metric/')),
      [],
    );
  },
);
