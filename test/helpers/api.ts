import type { Answer } from './env.js';
import { matchPath, validateAnswer, validateComponent } from './openapi.js';

/**
 * Every answer a test receives through these helpers is checked against docs/openapi.json; a mismatch fails the test
 * where the request was made. An undocumented path may only answer the common 404 error.
 */
export function checkAnswer(method: string, url: string, status: number, headers: Headers, body: unknown): void {
  const path = new URL(url).pathname;
  // A path that is not valid percent-encoding names no endpoint, whatever template it looks like.
  const undocumented = matchPath(path) === undefined || !decodes(path);
  const problems =
    undocumented && status === 404
      ? validateComponent('Error', body)
      : validateAnswer(method, url, status, headers, body);
  if (problems.length > 0) throw new Error(`answer does not match docs/openapi.json:\n${problems.join('\n')}`);
}

function decodes(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** An answer whose body may be any JSON (the API answers arrays too). */
export interface ApiAnswer extends Omit<Answer, 'body'> {
  body: unknown;
  /** The body as an object (tests that know its shape). */
  json: Record<string, unknown>;
}

/** One HTTP request to a listener, as a client would make it. */
export async function call(base: string, method: string, path: string, opts: CallOptions = {}): Promise<ApiAnswer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  checkAnswer(method, `${base}${path}`, res.status, res.headers, parsed);
  return { status: res.status, headers: res.headers, body: parsed, json: (parsed ?? {}) as Record<string, unknown> };
}

/** Log in and answer the access token (throws with the answer when refused). */
export async function login(base: string, email: string, password = 'correct horse battery'): Promise<string> {
  const r = await call(base, 'POST', '/v1/auth/login', { body: { email, password } });
  if (r.status !== 200) throw new Error(`login ${email}: ${r.status} ${JSON.stringify(r.body)}`);
  return String(r.json.access_token);
}

/**
 * Run a burst that must fall within one UTC minute (rate windows): started with at least 15 s of the minute left;
 * if the minute still turned during it (a loaded machine), run it once more from the start of the next minute.
 */
export async function inOneMinute<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const left = 60_000 - (Date.now() % 60_000);
    if (attempt > 0 || left < 15_000) await new Promise((r) => setTimeout(r, left + 100));
    const minute = Math.floor(Date.now() / 60_000);
    const out = await run();
    if (Math.floor(Date.now() / 60_000) === minute || attempt > 0) return out;
  }
}
