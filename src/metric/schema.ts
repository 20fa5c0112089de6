// An answer's JSON schema is its one description: the TypeScript type is read from it (`FromSchema`), the API's
// docs/openapi.json is checked against it (test/unit/openapi.test.ts), and answers are validated by it in tests.
// `FromSchema` reads the subset of JSON Schema that answers use: objects with `properties` and `required`, arrays,
// `enum`, and `type` as a name or a list of names (`['number', 'null']`).

type Primitive<T> = T extends 'string'
  ? string
  : T extends 'number' | 'integer'
    ? number
    : T extends 'boolean'
      ? boolean
      : T extends 'null'
        ? null
        : unknown;

type Required<S> = S extends { required: readonly (infer R)[] } ? R : never;

type ObjectOf<P, R> = { -readonly [K in keyof P as K extends R ? K : never]: FromSchema<P[K]> } & {
  -readonly [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]>;
};

/** The type of the values a schema (declared `as const`) accepts. */
export type FromSchema<S> = S extends { enum: readonly (infer E)[] }
  ? E
  : S extends { type: 'object'; properties: infer P }
    ? ObjectOf<P, Required<S>>
    : S extends { type: 'array'; items: infer I }
      ? FromSchema<I>[]
      : S extends { type: readonly (infer T)[] }
        ? Primitive<T>
        : S extends { type: infer T }
          ? Primitive<T>
          : unknown;

/** The fragments answers share: a count, a non-negative amount (hours, rupees), a percentage. */
export const countSchema = { type: 'integer', minimum: 0 } as const;
export const amountSchema = { type: 'number', minimum: 0 } as const;
export const shareSchema = { type: 'number', minimum: 0, maximum: 100 } as const;
