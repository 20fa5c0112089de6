import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import t from 'tap';
import { contentSecurityPolicy, dashboard, dashboardDir } from '../../src/api/dashboard.js';
import { createHttpServer } from '../../src/http/server.js';
import { createLogger } from '../../src/log.js';
import { engineTest } from '../helpers/engines.js';

// How the api role serves the dashboard (src/api/dashboard.ts), on both engines; and the built bundle's budget.

const log = createLogger('silent');
const dir = mkdtempSync(join(tmpdir(), 'darshak-dashboard-files-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'assets'));
const html = '<!doctype html><title>Darshak</title><script type="module" src="/assets/app-1a2b.js"></script>';
const js = `console.log(${JSON.stringify('x'.repeat(5000))});`;
writeFileSync(join(dir, 'index.html'), html);
writeFileSync(join(dir, 'assets', 'app-1a2b.js'), js);

for (const engine of ['uws', 'node'] as const) {
  t.test(`engine ${engine}`, engineTest(engine), async (t) => {
    const app = dashboard(log, dir);
    const server = await createHttpServer({
      listener: `dash-${engine}`,
      host: '127.0.0.1',
      port: 0,
      engine,
      routes: app.routes,
      fallback: app.fallback,
      maxBodyBytes: 1024,
      log,
    });
    t.teardown(() => server.close());
    const base = `http://127.0.0.1:${server.port}`;
    const page = { accept: 'text/html,application/xhtml+xml', 'accept-encoding': 'identity' };

    const root = await fetch(`${base}/`, { headers: page });
    t.equal(root.status, 200);
    t.equal(await root.text(), html);
    t.equal(root.headers.get('content-type'), 'text/html; charset=utf-8');
    t.equal(root.headers.get('cache-control'), 'no-cache', 'a new release is picked up at once');
    t.equal(root.headers.get('content-security-policy'), contentSecurityPolicy);
    t.equal(root.headers.get('x-frame-options'), 'DENY');
    t.equal(root.headers.get('x-content-type-options'), 'nosniff');

    for (const path of ['/live', '/admin', '/no-such-page']) {
      const r = await fetch(`${base}${path}`, { headers: page });
      t.equal(r.status, 200, `${path}: a browser asking for a page gets the app`);
      t.equal(await r.text(), html);
    }
    for (const [path, headers] of [
      ['/live', { accept: 'application/json' }],
      ['/v1/nowhere', page],
      ['/favicon.ico', page],
    ] as const) {
      const r = await fetch(`${base}${path}`, { headers });
      t.equal(r.status, 404, `${path} (${headers.accept}): 404`);
      t.match(await r.json(), { error: { code: 'not_found' } });
    }
    const post = await fetch(`${base}/live`, { method: 'POST', headers: page });
    t.equal(post.status, 404, 'only GET and HEAD fall back');
    await post.arrayBuffer();

    const asset = await fetch(`${base}/assets/app-1a2b.js`, { headers: { 'accept-encoding': 'identity' } });
    t.equal(asset.status, 200);
    t.equal(await asset.text(), js);
    t.equal(
      asset.headers.get('cache-control'),
      'public, max-age=31536000, immutable',
      'hashed names are cached for good',
    );
    t.equal(asset.headers.get('content-type'), 'text/javascript; charset=utf-8');
    const etag = asset.headers.get('etag')!;
    const again = await fetch(`${base}/assets/app-1a2b.js`, { headers: { 'if-none-match': etag } });
    t.equal(again.status, 304);
    t.equal((await again.arrayBuffer()).byteLength, 0);
    t.equal((await fetch(`${base}/assets/../index.html`)).status, 404, 'no way out of the assets');
    t.equal((await fetch(`${base}/assets/missing.js`)).status, 404);

    await app.compressed;
    // fetch() would decompress: read the bytes as sent.
    const { request } = await import('node:http');
    const raw = (encoding: string): Promise<{ headers: Record<string, unknown>; body: Buffer }> =>
      new Promise((resolve, reject) => {
        request(`${base}/assets/app-1a2b.js`, { headers: { 'accept-encoding': encoding } }, (res) => {
          const chunks: Buffer[] = [];
          res
            .on('data', (c: Buffer) => chunks.push(c))
            .on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        })
          .on('error', reject)
          .end();
      });
    const br = await raw('gzip, deflate, br');
    t.equal(br.headers['content-encoding'], 'br');
    t.equal(brotliDecompressSync(br.body).toString(), js);
    const gz = await raw('gzip');
    t.equal(gz.headers['content-encoding'], 'gzip');
    t.equal(gunzipSync(gz.body).toString(), js);
    t.ok(gz.body.length < js.length / 10, 'compressed');
  });
}

t.test('without a build, / says how to build it', async (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'darshak-dashboard-none-'));
  t.teardown(() => rmSync(empty, { recursive: true, force: true }));
  const app = dashboard(log, empty);
  const server = await createHttpServer({
    listener: 'dash-none',
    host: '127.0.0.1',
    port: 0,
    engine: 'node',
    routes: app.routes,
    fallback: app.fallback,
    maxBodyBytes: 1024,
    log,
  });
  t.teardown(() => server.close());
  const r = await fetch(`http://127.0.0.1:${server.port}/`, { headers: { accept: 'text/html' } });
  t.equal(r.status, 404);
  t.match(await r.json(), { error: { code: 'not_found', message: /npm run build/ } });
});

t.test(
  'the built dashboard: first load within 300 KB of gzipped JavaScript, and nothing inline for the CSP to refuse',
  async (t) => {
    const index = readFileSync(join(dashboardDir, 'index.html'), 'utf8');
    // What the first page load fetches: the entry script and the chunks it preloads. The India map is a lazy chunk.
    const firstLoad = [
      ...index.matchAll(/<(?:script[^>]*\bsrc|link[^>]*rel="modulepreload"[^>]*\bhref)="\/assets\/([^"]+\.js)"/g),
    ].map((m) => m[1]!);
    t.ok(firstLoad.length >= 1, `entry scripts: ${firstLoad.join(', ')}`);
    const gzipped = firstLoad.reduce(
      (n, f) => n + gzipSync(readFileSync(join(dashboardDir, 'assets', f)), { level: 9 }).length,
      0,
    );
    t.ok(gzipped <= 300 * 1024, `first load ${(gzipped / 1024).toFixed(1)} KB gzipped`);
    t.notMatch(index, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    t.notMatch(index, /<style\b|\sstyle=/, 'no inline style');
    const lazy = readdirSync(join(dashboardDir, 'assets')).filter((f) => f.endsWith('.js') && !firstLoad.includes(f));
    t.ok(
      lazy.some((f) => f.startsWith('india')),
      `the map loads later: ${lazy.join(', ')}`,
    );
  },
);
