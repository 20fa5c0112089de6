import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import { replyError } from '../http/server.js';
import type { Handler, HttpReply, HttpRequest, Route } from '../http/types.js';
import type { Logger } from '../log.js';

/**
 * Where `npm run build` puts the dashboard (src/dashboard/vite.config.ts): dist/dashboard, beside dist/src when this
 * runs built, or from the repository's root when it runs from source (the tests).
 */
export const dashboardDir =
  [new URL('../../dashboard/', import.meta.url), new URL('../../dist/dashboard/', import.meta.url)]
    .map((u) => fileURLToPath(u))
    .find((d) => existsSync(join(d, 'index.html'))) ?? fileURLToPath(new URL('../../dashboard/', import.meta.url));

const types: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json; charset=utf-8',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/**
 * No inline script or style, nothing from another origin, no framing. `connect-src 'self'` covers the live feed's
 * same-origin ws:/wss: (CSP 3); exports download from this origin too (or a presigned S3 link, a navigation).
 */
export const contentSecurityPolicy =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

const pageHeaders = {
  'content-security-policy': contentSecurityPolicy,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

interface Asset {
  type: string;
  etag: string;
  raw: Buffer;
  /** Compressed forms, once made: until then the raw bytes go out. */
  gzip?: Buffer;
  br?: Buffer;
}

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

/**
 * Read a file now; compress it in the background (libuv's pool), once: the best brotli of the whole dashboard takes
 * about 0.4 s of CPU, which would otherwise hold up the api role's start.
 */
function load(path: string, log: Logger, pending: Array<Promise<unknown>>): Asset {
  const raw = readFileSync(path);
  const asset: Asset = {
    type: types[extname(path)] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(raw).digest('base64url').slice(0, 22)}"`,
    raw,
  };
  pending.push(
    Promise.all([
      gzipAsync(raw, { level: 9 }),
      brotliAsync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
    ]).then(
      ([gz, br]) => Object.assign(asset, { gzip: gz, br }),
      (err: Error) => log.warn({ err: err.message, path }, 'dashboard file not compressed; served as is'),
    ),
  );
  return asset;
}

function send(req: HttpRequest, asset: Asset, cache: string, extra: Record<string, string> = {}): HttpReply {
  const headers: Record<string, string> = {
    'content-type': asset.type,
    'cache-control': cache,
    etag: asset.etag,
    vary: 'Accept-Encoding',
    ...extra,
  };
  if (req.header('if-none-match') === asset.etag) return { status: 304, headers };
  const accepts = (req.header('accept-encoding') ?? '').toLowerCase();
  // Compressed once: the dashboard is a few hundred kB and never changes while running.
  if (asset.br && /\bbr\b/.test(accepts))
    return { status: 200, headers: { ...headers, 'content-encoding': 'br' }, body: asset.br };
  if (asset.gzip && /\bgzip\b/.test(accepts))
    return { status: 200, headers: { ...headers, 'content-encoding': 'gzip' }, body: asset.gzip };
  return { status: 200, headers, body: asset.raw };
}

export interface Dashboard {
  routes: Route[];
  /** For GETs no route answers: a browser asking for a page gets the app, which routes on the client. */
  fallback: Handler;
  /** Settles once every file's compressed forms are made. */
  compressed: Promise<void>;
}

/**
 * The dashboard's files, read into memory once: `/` and every page path get index.html (never cached, so a new
 * release is picked up), `/assets/*` the hashed bundles (cached for a year), compressed when the browser accepts it.
 * Without a build, `/` says so.
 */
export function dashboard(log: Logger, dir = dashboardDir): Dashboard {
  const index = join(dir, 'index.html');
  if (!existsSync(index)) {
    log.warn({ dir }, 'the dashboard is not built (npm run build); {base_url}/ answers 404');
    const missing: Handler = (req) =>
      replyError(req, 'not_found', 'The dashboard is not built on this server: run npm run build.');
    return {
      routes: [{ method: 'GET', path: '/', handler: missing }],
      fallback: (req) => replyError(req, 'not_found'),
      compressed: Promise.resolve(),
    };
  }
  const pending: Array<Promise<unknown>> = [];
  const page = load(index, log, pending);
  const assets = new Map<string, Asset>();
  const assetDir = join(dir, 'assets');
  for (const name of existsSync(assetDir) ? readdirSync(assetDir) : [])
    assets.set(name, load(join(assetDir, name), log, pending));
  const app: Handler = (req) => send(req, page, 'no-cache', pageHeaders);
  return {
    routes: [
      { method: 'GET', path: '/', handler: app },
      {
        method: 'GET',
        path: '/assets/{name}',
        handler: (req) => {
          const asset = assets.get(req.params.name ?? '');
          return asset
            ? send(req, asset, 'public, max-age=31536000, immutable', { 'x-content-type-options': 'nosniff' })
            : replyError(req, 'not_found');
        },
      },
    ],
    compressed: Promise.all(pending).then(() => undefined),
    fallback: (req) => {
      const wantsPage =
        /\btext\/html\b/.test(req.header('accept') ?? '') && !req.path.startsWith('/v1/') && extname(req.path) === '';
      return wantsPage ? app(req) : replyError(req, 'not_found');
    },
  };
}
