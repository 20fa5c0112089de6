import { createHash } from 'node:crypto';
import type { KV } from 'nats';
import type { ErrorCode } from '../errors.js';
import { plans, type Plan } from './plans.js';
import type { TenantRecord } from './records.js';

// What every store of the control plane shares: its error, the JSON records, the per-tenant keys and the per-tenant
// caps, lists and revocations.

export class ControlError extends Error {
  override name = 'ControlError';
  constructor(
    readonly code: Extract<ErrorCode, 'invalid_request' | 'already_exists' | 'not_found' | 'limit_reached'>,
    message: string,
  ) {
    super(message);
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const encodeRecord = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
export const decodeRecord = <T>(value: Uint8Array): T => JSON.parse(decoder.decode(value)) as T;

export const sha256Hex = (text: string): string => createHash('sha256').update(text).digest('hex');

/** A refused input, as the api and the CLI report it (invalid_request). */
export function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new ControlError('invalid_request', message);
}

export function checkText(value: string, field: string, max = 200): void {
  check(
    typeof value === 'string' && value.trim().length > 0 && value.length <= max,
    `${field} must be 1 to ${max} characters`,
  );
}

/**
 * Every current value of a bucket. A watch that ends once it has delivered them, rather than `kv.keys()`, whose
 * end-of-keys test (a message's pending count reaching 0) was seen to stop early and miss keys just written.
 */
export async function readAll<T>(kv: KV, key = '>'): Promise<T[]> {
  const out: T[] = [];
  let iter: { stop(): void } | undefined;
  let done = false;
  // Called during kv.watch() itself when nothing matches, before `iter` is assigned.
  const watch = await kv.watch({ key, initializedFn: () => (iter ? iter.stop() : (done = true)) });
  iter = watch;
  if (done) watch.stop();
  for await (const e of watch) {
    if (e.operation === 'PUT') out.push(decodeRecord<T>(e.value));
  }
  return out;
}

/**
 * The bucket key of a tenant's API key, service account or webhook endpoint: under the tenant, so that a tenant's
 * list reads its own records only (a watch of `<tenant>.>`).
 */
export const tenantKey = (tenant: string, id: string): string => `${tenant}.${id}`;

/**
 * Create a record within the tenant's plan's cap of active ones: written, then counted, and taken back when the
 * count is past the cap, so creations racing on several processes cannot together pass it.
 */
export async function withinCap<T extends { tenant: string; revoked_at?: string | null }>(
  kv: KV,
  tenant: TenantRecord,
  cap: keyof Pick<Plan, 'max_api_keys' | 'max_service_accounts' | 'max_webhooks'>,
  what: string,
  id: string,
  create: () => Promise<unknown>,
): Promise<void> {
  const max = plans[tenant.plan][cap];
  const active = async (): Promise<T[]> =>
    (await readAll<T>(kv, tenantKey(tenant.slug, '>'))).filter((r) => !r.revoked_at);
  const refused = new ControlError(
    'limit_reached',
    `This tenant holds ${max} ${what}, as many as the ${tenant.plan} plan allows; revoke or delete one first`,
  );
  if ((await active()).length >= max) throw refused;
  await create();
  if ((await active()).length > max) {
    await kv.purge(tenantKey(tenant.slug, id));
    throw refused;
  }
}

/** A tenant's records of a bucket, newest first. */
export async function listOf<T extends { tenant: string; created_at: string }>(
  kv: KV,
  tenant: TenantRecord,
): Promise<T[]> {
  return (await readAll<T>(kv, tenantKey(tenant.slug, '>'))).sort((a, b) => b.created_at.localeCompare(a.created_at));
}

/** Set `revoked_at` once, with compare-and-set; another tenant's record is "not found". */
export async function revoke(
  kv: KV,
  what: string,
  idPattern: RegExp,
  tenant: string,
  id: string,
): Promise<{ id: string; revoked_at: string }> {
  const missing = new ControlError('not_found', `${what} ${JSON.stringify(id)} does not exist`);
  if (!idPattern.test(id)) throw missing;
  for (let attempt = 0; attempt < 10; attempt++) {
    const e = await kv.get(tenantKey(tenant, id));
    if (!e || e.operation !== 'PUT') throw missing;
    const record = decodeRecord<{ tenant: string; revoked_at: string | null }>(e.value);
    if (record.tenant !== tenant) throw missing;
    if (record.revoked_at) return { id, revoked_at: record.revoked_at };
    record.revoked_at = new Date().toISOString();
    try {
      await kv.update(tenantKey(tenant, id), encodeRecord(record), e.revision);
      return { id, revoked_at: record.revoked_at };
    } catch {
      // Changed meanwhile: read again.
    }
  }
  throw new Error(`${what} ${id} kept changing during revocation`);
}
