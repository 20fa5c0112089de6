import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { errorBody } from '../errors.js';
import type { HttpReply, Route } from '../http/types.js';

/**
 * The web SDK's script-tag file as `npm run build` leaves it (sdk/web/vite.config.ts), seen from src/ingest when
 * running from source and from dist/src/ingest when built.
 */
export const sdkScriptPath = [
  new URL('../../sdk/web/dist/darshak.js', import.meta.url),
  new URL('../../../sdk/web/dist/darshak.js', import.meta.url),
]
  .map((u) => fileURLToPath(u))
  .find((p) => existsSync(p));

/** What a page's `<script integrity>` must say for these bytes (Subresource Integrity, SHA-384). */
export const integrityOf = (bytes: Buffer): string => `sha384-${createHash('sha384').update(bytes).digest('base64')}`;

/**
 * GET /sdk/v1/darshak.js: the SDK for a script tag, from any origin (ingest's CORS), cached for a day, with its SRI
 * hash in `X-Darshak-Integrity` (docs/sdk-web.md). Read once at start: a new build is served by a restart.
 */
export function sdkRoutes(): Route[] {
  const bytes = sdkScriptPath ? readFileSync(sdkScriptPath) : null;
  const integrity = bytes ? integrityOf(bytes) : '';
  const etag = `"${integrity.slice(7, 29)}"`;
  return [
    {
      method: 'GET',
      path: '/sdk/v1/darshak.js',
      async handler(req): Promise<HttpReply> {
        if (!bytes)
          return {
            status: 404,
            body: errorBody('not_found', req.requestId, 'The web SDK is not built here: run npm run build'),
          };
        const headers = {
          'content-type': 'text/javascript; charset=utf-8',
          'cache-control': 'public, max-age=86400',
          'x-darshak-integrity': integrity,
          'cross-origin-resource-policy': 'cross-origin',
          'x-content-type-options': 'nosniff',
          etag,
        };
        if (req.header('if-none-match') === etag) return { status: 304, headers };
        return { status: 200, headers, body: bytes };
      },
    },
  ];
}
