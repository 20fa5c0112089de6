import { parseArgs } from 'node:util';

export class UsageError extends Error {
  override name = 'UsageError';
}

type Spec = Record<string, { type: 'string' | 'boolean' }>;

/** Strict flag parsing: unknown flags and stray words are usage errors, never ignored. */
export function flags<S extends Spec>(
  argv: string[],
  spec: S,
  required: ReadonlyArray<keyof S & string> = [],
): { [K in keyof S]?: S[K]['type'] extends 'string' ? string : boolean } {
  let values: Record<string, string | boolean | undefined>;
  try {
    const parsed = parseArgs({ args: argv, options: spec, strict: true, allowPositionals: false });
    values = parsed.values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  for (const name of required) {
    if (values[name] === undefined || values[name] === '') throw new UsageError(`--${name} is required`);
  }
  return values as { [K in keyof S]?: S[K]['type'] extends 'string' ? string : boolean };
}

export function integerFlag(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value)))
    throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
  return Number(value);
}
