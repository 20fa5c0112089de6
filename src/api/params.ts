import { fail, ok, type Result } from '../result.js';
import { intervals } from '../store/queries/answers.js';

// Query parameters of the API: each endpoint declares its parameters; anything else, a repeat or a bad value is
// refused naming the parameter (docs/api.md), so a typo never silently falls back to a default.

export type ParamSpec =
  | { kind: 'enum'; values: readonly string[]; default?: string }
  | { kind: 'int'; min: number; max: number; default?: number; allowed?: readonly number[] }
  | { kind: 'bool' };

type ValueOf<S extends ParamSpec> = S extends { kind: 'int'; allowed: readonly (infer A)[]; default: number }
  ? A
  : S extends { kind: 'enum'; default: string }
    ? string
    : S extends { kind: 'int'; default: number }
      ? number
      : S extends { kind: 'enum' }
        ? string | undefined
        : S extends { kind: 'int' }
          ? number | undefined
          : boolean | undefined;

export type Params<T extends Record<string, ParamSpec>> = { [K in keyof T]: ValueOf<T[K]> };

export type ParamResult<T extends Record<string, ParamSpec>> = Result<
  Params<T>,
  { parameter: string; message: string }
>;

const digits = /^\d{1,16}$/;

function parseOne(name: string, raw: string, spec: ParamSpec): Result<string | number | boolean, string> {
  switch (spec.kind) {
    case 'enum':
      return spec.values.includes(raw) ? ok(raw) : fail(`${name} must be one of ${spec.values.join(', ')}`);
    case 'bool':
      return raw === 'true' || raw === 'false' ? ok(raw === 'true') : fail(`${name} must be true or false`);
    case 'int': {
      const n = digits.test(raw) ? Number(raw) : NaN;
      if (spec.allowed) {
        return spec.allowed.includes(n) ? ok(n) : fail(`${name} must be one of ${spec.allowed.join(', ')}`);
      }
      if (!Number.isSafeInteger(n) || n < spec.min || n > spec.max)
        return fail(`${name} must be a whole number from ${spec.min} to ${spec.max}`);
      return ok(n);
    }
  }
}

export function parseParams<T extends Record<string, ParamSpec>>(query: URLSearchParams, specs: T): ParamResult<T> {
  const out: Record<string, string | number | boolean | undefined> = {};
  const seen = new Set<string>();
  for (const [name, raw] of query) {
    const spec = Object.hasOwn(specs, name) ? specs[name] : undefined;
    // Names are echoed back: cut them short so a hostile one cannot bloat the answer.
    const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name;
    if (!spec) {
      const known = Object.keys(specs);
      return fail({
        parameter: shown,
        message: `unknown parameter ${JSON.stringify(shown)}${known.length ? `; this endpoint takes ${known.join(', ')}` : '; this endpoint takes none'}`,
      });
    }
    if (seen.has(name)) return fail({ parameter: name, message: `${name} is given more than once` });
    seen.add(name);
    const parsed = parseOne(name, raw, spec);
    if (!parsed.ok) return fail({ parameter: name, message: parsed.error });
    out[name] = parsed.value;
  }
  for (const [name, spec] of Object.entries(specs)) {
    if (out[name] === undefined && spec.kind !== 'bool' && spec.default !== undefined) out[name] = spec.default;
  }
  return ok(out as Params<T>);
}

export const rangeParam = {
  kind: 'enum',
  values: ['24h', '7d', '30d', 'qtd'],
  default: '24h',
} as const satisfies ParamSpec;
export const limitParam = { kind: 'int', min: 1, max: 200, default: 50 } as const satisfies ParamSpec;
export const offsetParam = { kind: 'int', min: 0, max: 1_000_000, default: 0 } as const satisfies ParamSpec;
export const intervalParam = {
  kind: 'int',
  min: 1,
  max: 60,
  default: 5,
  allowed: intervals,
} as const satisfies ParamSpec;
