import { readFileSync } from 'node:fs';
import t from 'tap';
import { errorRegistry } from '../../src/errors.js';
import { configKeys } from '../../src/config/schema.js';
import { tableRows } from '../helpers/docs.js';
import { root } from '../helpers/env.js';

t.test('docs/errors.md lists exactly the registry: code, status, message', async (t) => {
  const rows = tableRows('docs/errors.md', 'code');
  const expected = Object.entries(errorRegistry).map(([code, spec]) => [
    code,
    spec.status === null ? 'per event' : String(spec.status),
    spec.message,
  ]);
  t.same(rows, expected);
});

t.test('docs/configuration.md lists exactly the config keys, their env names and defaults', async (t) => {
  const defaults = JSON.parse(readFileSync(`${root}config/default.json`, 'utf8')) as Record<string, unknown>;
  const rows = tableRows('docs/configuration.md', 'key');
  const expected = Object.entries(configKeys).map(([key, spec]) => [
    key,
    key.toUpperCase(),
    JSON.stringify(defaults[key]),
    spec.description.replace(/`/g, ''),
  ]);
  t.same(rows, expected);
});

t.test('error codes are snake_case and statuses are errors', async (t) => {
  for (const [code, spec] of Object.entries(errorRegistry)) {
    t.match(code, /^[a-z]+(_[a-z0-9]+)*$/);
    if (spec.status !== null) t.ok(spec.status >= 400 && spec.status < 600, code);
  }
});
