// A deterministic corpus of hostile requests against every endpoint of {base_url} in docs/openapi.json: bad path
// parameters, query strings, bodies and headers. Every answer must be one the document declares, a 4xx carrying the
// error body when refused, never a 5xx; the service must still answer afterwards.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Rng } from '../../bench/simulator/rng.js';
import { checkAnswer, login } from '../helpers/api.js';
import { cli, makeTenant, startService } from '../helpers/env.js';
import { openapiDocument } from '../helpers/openapi.js';

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-hostile-api-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
// A per-token rate high enough that the corpus reaches the handlers rather than the limiter.
const svc = await startService({ data_dir: dataDir, analytics_rate_per_minute: 100_000 }, 'api');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
await makeTenant(svc.config.nats_prefix, 'acme', 'enterprise');
const owner = await login(base, 'owner@acme.test');
// Signing out everywhere and changing the password act on their caller's user: they are called as another one.
const added = await cli(
  [
    'user',
    'add',
    '--tenant',
    'acme',
    '--email',
    'self@acme.test',
    '--password',
    'correct horse battery',
    '--role',
    'viewer',
  ],
  { NATS_PREFIX: svc.config.nats_prefix },
);
if (added.code !== 0) throw new Error(added.stderr);

const methods = ['get', 'post', 'put', 'patch', 'delete'] as const;
/** Every (method, path template) the api listener serves. */
const endpoints = Object.entries(
  openapiDocument.paths as Record<string, Record<string, unknown> & { servers?: Array<{ url: string }> }>,
)
  .filter(([, item]) => (item.servers?.[0]?.url ?? '{base_url}') === '{base_url}')
  .flatMap(([path, item]) => methods.filter((m) => item[m] !== undefined).map((m) => [m.toUpperCase(), path] as const));
const selfActing = new Set(['/v1/auth/logout', '/v1/auth/logout-everywhere', '/v1/auth/password']);

const rng = new Rng(31);
const word = (n: number): string =>
  Array.from({ length: n }, () => 'abcdefghijklmnopqrstuvwxyz0123456789'[rng.int(0, 35)]).join('');
const pathParams = [
  'x',
  '..',
  '..%2f..%2fetc%2fpasswd',
  '%00',
  '%ZZ',
  'a'.repeat(5000),
  '%C3%A9',
  '%3Cscript%3E',
  '-1',
  '1e309',
  '0x10',
  '__proto__',
  'constructor',
  'wh_' + 'f'.repeat(20),
  'sa_' + '0'.repeat(20),
  'key_' + '1'.repeat(20),
  'dlv_' + '0'.repeat(24),
];
const queries = [
  '',
  '?limit=-1',
  '?limit=1e9',
  '?limit=abc',
  '?offset=-5',
  '?range=',
  '?range=%ZZ',
  '?range=24h&range=7d',
  '?__proto__=1',
  `?from=${'9'.repeat(400)}`,
  '?status=%00',
  `?${word(3)}=${word(4)}`,
  '?token=a.b.c',
  `?from=2026-13-45&to=x`,
  '?region=%F0%9F%98%80',
  `?q=${'%'.repeat(50)}`,
];
const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
function body(): string | Buffer | undefined {
  return rng.pick<() => string | Buffer | undefined>([
    () => undefined,
    () => '',
    () => 'null',
    () => '[]',
    () => '{',
    () => '"text"',
    () => '1e999',
    () => deep(20_000),
    () => `{"a":${deep(5000)}}`,
    () => '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}',
    () => Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
    () => JSON.stringify({ name: 'x'.repeat(70_000) }),
    () => JSON.stringify({ name: 'x'.repeat(60_000) }),
    () => JSON.stringify({ [word(6)]: word(6) }),
    () =>
      JSON.stringify({ name: 1, url: [], categories: 'all', scopes: {}, environment: null, email: 5, password: true }),
    () => JSON.stringify({ name: 'ok', environment: 'production\u0000', scopes: ['analytics:read', 'settings:write'] }),
    () => JSON.stringify({ url: 'http://169.254.169.254/latest/meta-data', categories: ['qos.error_spike'] }),
    () => JSON.stringify({ url: 'javascript:alert(1)', categories: ['qos.error_spike'], format: 'slack' }),
    () => JSON.stringify({ range: '24h', format: 'parquet', from: '0000-00-00', to: '9999-99-99' }),
    () => JSON.stringify({ 'qos.rebuffer_spike': { ratio: -1 }, toString: { x: 1 } }),
    () => JSON.stringify({ current_password: 'x', new_password: 'y'.repeat(2000) }),
    () => JSON.stringify({ enabled: 'yes', categories: [null] }),
  ])();
}
const authHeaders = (token: string): string | undefined =>
  rng.pick([
    undefined,
    'Bearer',
    'Bearer a.b.c',
    `Bearer ${'a'.repeat(10_000)}.b.c`,
    'Basic YWRtaW46YWRtaW4=',
    `Bearer eyJhbGciOiJub25lIn0.${Buffer.from('{"sub":"1","tenant":"acme","role":"owner","scope":"settings:write"}').toString('base64url')}.`,
    `bearer ${token}`,
    `Bearer ${token}x`,
  ]);
const contentTypes = [
  'application/json',
  'text/plain',
  'application/json; charset=latin1',
  'multipart/form-data; boundary=x',
  'application/x-www-form-urlencoded',
  '',
];

interface Shot {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | Buffer | undefined;
}

function shots(method: string, template: string, token: string): Shot[] {
  const out: Shot[] = [];
  for (let i = 0; i < 24; i++) {
    const path = template.replace(/\{[^}]+\}/g, () => rng.pick(pathParams));
    const headers: Record<string, string> = {};
    const auth = i % 3 === 0 ? authHeaders(token) : `Bearer ${token}`;
    if (auth !== undefined) headers.authorization = auth;
    // fetch sends no body with a GET.
    const b = method === 'GET' ? undefined : method === 'DELETE' ? (i % 6 === 5 ? body() : undefined) : body();
    if (b !== undefined) headers['content-type'] = rng.pick(contentTypes);
    if (i % 8 === 7)
      headers['x-request-id'] = rng.pick(['', 'x'.repeat(5000), '\u00e9', '../../']).replace(/[^\x20-\x7e]/g, '?');
    out.push({ method, url: `${base}${path}${rng.pick(queries)}`, headers, body: b });
  }
  return out;
}

t.test('every endpoint of the api listener refuses hostile requests with a declared 4xx and never a 5xx', async (t) => {
  t.ok(endpoints.length >= 30, `the document's endpoints (${endpoints.length})`);
  let sent = 0;
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  for (const [method, template] of endpoints) {
    const token = selfActing.has(template) ? await login(base, 'self@acme.test') : owner;
    for (const s of shots(method, template, token)) {
      sent++;
      let res: Response;
      try {
        res = await fetch(s.url, { method: s.method, headers: s.headers, body: s.body });
      } catch (err) {
        failures.push(`${s.method} ${s.url.slice(0, 120)}: no answer (${(err as Error).message})`);
        continue;
      }
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON: the dashboard's HTML and assets.
      }
      const what = `${s.method} ${s.url.slice(base.length, base.length + 120)} (${s.body === undefined ? 'no body' : `${s.body.length} B body`})`;
      if (res.status >= 500) failures.push(`${what}: ${res.status} ${text.slice(0, 200)}`);
      try {
        checkAnswer(s.method, s.url, res.status, res.headers, parsed);
      } catch (err) {
        failures.push(`${what}: ${(err as Error).message.slice(0, 400)}`);
      }
    }
  }
  t.same(failures, [], `${sent} hostile requests: every answer declared, none a 5xx`);
  t.comment(
    `answers by status: ${[...statuses]
      .sort((a, b) => a[0] - b[0])
      .map(([s, n]) => `${s}×${n}`)
      .join(' ')}`,
  );
  t.ok(
    (statuses.get(400) ?? 0) > 100 && (statuses.get(404) ?? 0) > 50 && (statuses.get(413) ?? 0) > 0,
    'the handlers were reached, not only the token check',
  );
  t.equal((await fetch(`${base}/healthz`)).status, 200, 'and the service still answers');
  t.equal(
    (await fetch(`${base}/v1/api-keys`, { headers: { authorization: `Bearer ${owner}` } })).status,
    200,
    'and serves its owner',
  );
});
