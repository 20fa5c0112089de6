// The dashboard's only way to the API: same origin, the token in memory (never in localStorage, where any script on
// the page could read it for as long as it lives), errors as the API's error bodies.
import { signal } from '@preact/signals';
import { limitParam } from '../api/params.js';

export interface Session {
  token: string;
  tenant: string;
  email: string;
  role: string;
  scopes: ReadonlySet<string>;
  expiresAt: number;
}

export const session = signal<Session | null>(null);

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string,
  ) {
    super(message);
  }
}

export interface Answer<T> {
  data: T;
  total: number | null;
}

function claims(token: string): { scope?: string; exp?: number } {
  const part = token.split('.')[1] ?? '';
  try {
    return JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/'))) as { scope?: string; exp?: number };
  } catch {
    return {};
  }
}

interface LoginAnswer {
  access_token: string;
  tenant_slug: string;
  user: { email: string; role: string };
}

export async function login(email: string, password: string): Promise<void> {
  const { data } = await request<LoginAnswer>('POST', '/v1/auth/login', { email, password }, null);
  const c = claims(data.access_token);
  session.value = {
    token: data.access_token,
    tenant: data.tenant_slug,
    email: data.user.email,
    role: data.user.role,
    scopes: new Set((c.scope ?? '').split(' ').filter(Boolean)),
    expiresAt: (c.exp ?? 0) * 1000,
  };
}

export function logout(): void {
  session.value = null;
}

export const can = (scope: string): boolean => session.value?.scopes.has(scope) ?? false;

async function request<T>(method: string, path: string, body: unknown, token: string | null): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token) headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
    });
  } catch {
    throw new ApiError(0, 'network', 'The server could not be reached. Check your connection and try again.', '');
  }
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    // Not JSON: reported below by status.
  }
  if (!res.ok) {
    const e = (parsed as { error?: { code?: string; message?: string; request_id?: string } } | null)?.error;
    throw new ApiError(
      res.status,
      e?.code ?? 'http_error',
      e?.message ?? `The server answered ${res.status}.`,
      e?.request_id ?? res.headers.get('x-request-id') ?? '',
    );
  }
  const total = res.headers.get('x-total-count');
  return { data: parsed as T, total: total === null ? null : Number(total) };
}

/** A call with the session's token; a 401 ends the session (expired or revoked), which shows the login page. */
export async function api<T>(
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<Answer<T>> {
  const s = session.value;
  try {
    return await request<T>(method, path, body, s?.token ?? null);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401 && s) session.value = null;
    throw err;
  }
}

export const get = async <T>(path: string): Promise<T> => (await api<T>('GET', path)).data;

/** Every item of a paged list (`limit` and `offset`, its total in `x-total-count`), the largest page at a time. */
export async function getAll<T>(path: string): Promise<T[]> {
  const items: T[] = [];
  const sep = path.includes('?') ? '&' : '?';
  for (;;) {
    const { data, total } = await api<T[]>('GET', `${path}${sep}limit=${limitParam.max}&offset=${items.length}`);
    items.push(...data);
    if (data.length === 0 || total === null || items.length >= total) return items;
  }
}
