import type { Handler, Route } from './types.js';

export type RouteMatch =
  | { kind: 'found'; handler: Handler; params: Record<string, string>; pattern: string }
  | { kind: 'method_not_allowed'; allow: string[] }
  | { kind: 'not_found' };

interface Compiled {
  method: string;
  pattern: string;
  segments: string[];
  handler: Handler;
}

export class Router {
  private readonly routes: Compiled[] = [];

  constructor(routes: readonly Route[] = []) {
    for (const r of routes) this.add(r);
  }

  add(route: Route): void {
    const duplicate = this.routes.find((r) => r.method === route.method && r.pattern === route.path);
    if (duplicate) throw new Error(`route ${route.method} ${route.path} is registered twice`);
    this.routes.push({
      method: route.method,
      pattern: route.path,
      segments: route.path.split('/'),
      handler: route.handler,
    });
  }

  match(method: string, path: string): RouteMatch {
    const parts = path.split('/');
    const allow: string[] = [];
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method === method || (method === 'HEAD' && route.method === 'GET')) {
        return { kind: 'found', handler: route.handler, params, pattern: route.pattern };
      }
      allow.push(route.method);
    }
    return allow.length > 0 ? { kind: 'method_not_allowed', allow } : { kind: 'not_found' };
  }
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | null {
  if (pattern.length !== parts.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string;
    const v = parts[i] as string;
    if (p.startsWith('{') && p.endsWith('}')) {
      if (v === '') return null;
      let decoded: string;
      try {
        decoded = decodeURIComponent(v);
      } catch {
        return null;
      }
      params[p.slice(1, -1)] = decoded;
    } else if (p !== v) {
      return null;
    }
  }
  return params;
}
