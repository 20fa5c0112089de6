import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Route } from '../http/types.js';

/** The repository's docs/openapi.json, found upward from this file (it runs from src/ in tests and dist/src/ built). */
export function openApiPath(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'docs', 'openapi.json');
    if (existsSync(join(dir, 'package.json')) && existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) throw new Error('docs/openapi.json not found above the program');
  }
}

/** GET /v1/openapi.json: the document kept in the repository, read once, served as is (no credential). */
export function openApiRoute(): Route {
  let text: string | undefined;
  return {
    method: 'GET',
    path: '/v1/openapi.json',
    handler() {
      text ??= readFileSync(openApiPath(), 'utf8');
      return {
        status: 200,
        headers: { 'content-type': 'application/json; charset=utf-8', 'Cache-Control': 'public, max-age=300' },
        body: text,
      };
    },
  };
}
