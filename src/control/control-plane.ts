import { createHash, randomBytes, randomInt } from 'node:crypto';
import type { KV } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { ErrorCode } from '../errors.js';
import { hashPassword } from './passwords.js';
import { WebhookStore, type WebhookInput } from './webhook-store.js';
import { planNames, plans, type Plan, type PlanName } from './plans.js';
import {
  environments,
  keyPrefixes,
  roles,
  type ApiKeyRecord,
  type Environment,
  type Role,
  type ServiceAccountRecord,
  type TenantRecord,
  type TenantStatus,
  type UserRecord,
  type WebhookRecord,
} from './records.js';

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

const slugPattern = /^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$/;
// Deliberately loose: one @, no spaces, a dot in the domain. Deliverability is the mail server's business.
const emailPattern = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
export const serviceAccountIdPattern = /^sa_[0-9a-f]{20}$/;
const base62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function randomString(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new ControlError('invalid_request', message);
}

function checkText(value: string, field: string, max = 200): void {
  check(typeof value === 'string' && value.trim().length > 0 && value.length <= max, `${field} must be 1 to ${max} characters`);
}

function checkPassword(password: string): void {
  check(typeof password === 'string' && password.length >= 8 && password.length <= 1024, 'password must be 8 to 1024 characters');
}

function checkPositive(value: number | null | undefined, field: string): void {
  if (value === null || value === undefined) return;
  check(Number.isSafeInteger(value) && value > 0, `${field} must be a positive integer`);
}

export interface CreateTenantInput {
  slug: string;
  name: string;
  plan: PlanName;
  ownerEmail: string;
  ownerPassword: string;
}

export interface UpdateTenantInput {
  plan?: PlanName;
  status?: TenantStatus;
  monthly_quota?: number | null;
  rate_per_minute?: number | null;
  name?: string;
  alert_thresholds?: Record<string, Record<string, number>> | null;
}

export interface UserView {
  id: number;
  email: string;
  role: Role;
}

export interface ApiKeyCreated {
  id: string;
  name: string;
  environment: Environment;
  scope: 'ingest:write';
  prefix: string;
  key: string;
  created_at: string;
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

/** Tenants, users and API keys in NATS KV: every process reads the same state and watches its changes. */
export class ControlPlane {
  private constructor(
    readonly tenants: KV,
    readonly users: KV,
    readonly apiKeys: KV,
    readonly serviceAccounts: KV,
    readonly webhooks: WebhookStore,
  ) {}

  static async open(bus: Bus): Promise<ControlPlane> {
    const [tenants, users, apiKeys, serviceAccounts, webhooks] = await Promise.all([
      bus.kv(bus.names.tenantsBucket),
      bus.kv(bus.names.usersBucket),
      bus.kv(bus.names.apiKeysBucket),
      bus.kv(bus.names.serviceAccountsBucket),
      bus.kv(bus.names.webhooksBucket),
    ]);
    return new ControlPlane(tenants, users, apiKeys, serviceAccounts, new WebhookStore(webhooks));
  }

  /** E-mail addresses of a tenant's owners (who hear about a disabled webhook endpoint). */
  async ownerEmails(tenant: string): Promise<string[]> {
    const all = await readAll<Partial<UserRecord>>(this.users);
    return all.filter((u) => typeof u === 'object' && u !== null && u.tenant === tenant && u.role === 'owner' && typeof u.email === 'string').map((u) => u.email as string);
  }

  async getTenant(slug: string): Promise<TenantRecord | null> {
    if (!slugPattern.test(slug)) return null;
    const e = await this.tenants.get(slug);
    return e && e.operation === 'PUT' ? decodeRecord<TenantRecord>(e.value) : null;
  }

  private async requireTenant(slug: string): Promise<TenantRecord> {
    const t = await this.getTenant(slug);
    if (!t) throw new ControlError('not_found', `tenant ${JSON.stringify(slug)} does not exist`);
    return t;
  }

  async createTenant(input: CreateTenantInput): Promise<{ tenant_slug: string; plan: PlanName; owner: UserView }> {
    check(slugPattern.test(input.slug), 'slug must be 2 to 63 characters of a-z, 0-9 and "-", starting and ending with a letter or digit');
    checkText(input.name, 'name');
    check(planNames.includes(input.plan), `plan must be one of ${planNames.join(', ')}`);
    this.checkCredentials(input.ownerEmail, input.ownerPassword);
    if (await this.findUserId(input.ownerEmail)) throw new ControlError('already_exists', `a user with e-mail ${input.ownerEmail} already exists`);
    const now = new Date().toISOString();
    const tenant: TenantRecord = {
      slug: input.slug,
      name: input.name.trim(),
      plan: input.plan,
      status: 'active',
      monthly_quota: null,
      rate_per_minute: null,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.tenants.create(input.slug, encodeRecord(tenant));
    } catch {
      throw new ControlError('already_exists', `tenant ${JSON.stringify(input.slug)} already exists`);
    }
    try {
      const owner = await this.addUser({ tenant: input.slug, email: input.ownerEmail, password: input.ownerPassword, role: 'owner' });
      return { tenant_slug: tenant.slug, plan: tenant.plan, owner };
    } catch (err) {
      await this.tenants.delete(input.slug);
      throw err;
    }
  }

  async updateTenant(slug: string, patch: UpdateTenantInput): Promise<TenantRecord> {
    if (patch.plan !== undefined) check(planNames.includes(patch.plan), `plan must be one of ${planNames.join(', ')}`);
    if (patch.status !== undefined) check(patch.status === 'active' || patch.status === 'inactive', 'status must be active or inactive');
    if (patch.name !== undefined) checkText(patch.name, 'name');
    checkPositive(patch.monthly_quota, 'monthly-quota');
    checkPositive(patch.rate_per_minute, 'rate-per-minute');
    for (let attempt = 0; attempt < 10; attempt++) {
      const e = await this.tenants.get(slug);
      if (!e || e.operation !== 'PUT') throw new ControlError('not_found', `tenant ${JSON.stringify(slug)} does not exist`);
      const next: TenantRecord = { ...decodeRecord<TenantRecord>(e.value), ...patch, updated_at: new Date().toISOString() };
      try {
        await this.tenants.update(slug, encodeRecord(next), e.revision);
        return next;
      } catch {
        // Someone else changed it meanwhile: read again.
      }
    }
    throw new Error(`tenant ${slug} kept changing during the update`);
  }

  private checkCredentials(email: string, password: string): void {
    check(typeof email === 'string' && emailPattern.test(email) && email.length <= 254, 'email must be an e-mail address');
    checkPassword(password);
  }

  private emailKey(email: string): string {
    return `email.${sha256Hex(email.trim().toLowerCase())}`;
  }

  async findUserId(email: string): Promise<number | null> {
    const e = await this.users.get(this.emailKey(email));
    return e && e.operation === 'PUT' ? decodeRecord<{ id: number }>(e.value).id : null;
  }

  async getUser(id: number): Promise<UserRecord | null> {
    const e = await this.users.get(`user.${id}`);
    return e && e.operation === 'PUT' ? decodeRecord<UserRecord>(e.value) : null;
  }

  /** Change a user's record by compare-and-set, retrying on a concurrent write; null when there is no such user. */
  private async updateUser(id: number, change: (u: UserRecord) => UserRecord): Promise<UserRecord | null> {
    for (;;) {
      const e = await this.users.get(`user.${id}`);
      if (!e || e.operation !== 'PUT') return null;
      const next = change(decodeRecord<UserRecord>(e.value));
      try {
        await this.users.update(`user.${id}`, encodeRecord(next), e.revision);
        return next;
      } catch (err) {
        if (!/wrong last sequence/i.test((err as Error).message)) throw err;
      }
    }
  }

  /**
   * Sign a user out everywhere: every token issued before carries the old session version and is refused by every
   * api process within about a second (the users bucket is watched).
   */
  async signOutEverywhere(id: number): Promise<UserRecord | null> {
    return this.updateUser(id, (u) => ({ ...u, session_version: (u.session_version ?? 0) + 1 }));
  }

  /**
   * Replace a hash made with older parameters, after its password was verified, unless the record changed meanwhile
   * (a password change wins). Tokens stay valid: nothing about the user changed.
   */
  async rehashPassword(id: number, verifiedHash: string, password: string): Promise<void> {
    const hash = await hashPassword(password);
    await this.updateUser(id, (u) => (u.password_hash === verifiedHash ? { ...u, password_hash: hash } : u));
  }

  /** A new password, and every token issued before it refused (docs/api.md "Signing out"). */
  async setPassword(id: number, password: string): Promise<UserRecord | null> {
    checkPassword(password);
    const hash = await hashPassword(password);
    return this.updateUser(id, (u) => ({ ...u, password_hash: hash, session_version: (u.session_version ?? 0) + 1 }));
  }

  private async nextUserId(): Promise<number> {
    for (;;) {
      const e = await this.users.get('seq');
      const next = e && e.operation === 'PUT' ? Number(decoder.decode(e.value)) + 1 : 1;
      try {
        if (e) await this.users.update('seq', encoder.encode(String(next)), e.revision);
        else await this.users.create('seq', encoder.encode(String(next)));
        return next;
      } catch {
        // Lost a race for this id: take the next one.
      }
    }
  }

  async addUser(input: { tenant: string; email: string; password: string; role: Role }): Promise<UserView> {
    check(roles.includes(input.role), `role must be one of ${roles.join(', ')}`);
    this.checkCredentials(input.email, input.password);
    await this.requireTenant(input.tenant);
    const email = input.email.trim();
    const id = await this.nextUserId();
    try {
      await this.users.create(this.emailKey(email), encodeRecord({ id }));
    } catch {
      throw new ControlError('already_exists', `a user with e-mail ${email} already exists`);
    }
    const user: UserRecord = {
      id,
      tenant: input.tenant,
      email,
      role: input.role,
      password_hash: await hashPassword(input.password),
      created_at: new Date().toISOString(),
    };
    await this.users.put(`user.${id}`, encodeRecord(user));
    return { id, email, role: user.role };
  }

  /**
   * Create a record within the tenant's plan's cap of active ones: written, then counted, and taken back when the
   * count is past the cap, so creations racing on several processes cannot together pass it.
   */
  private async withinCap<T extends { tenant: string; revoked_at?: string | null }>(
    kv: KV,
    tenant: TenantRecord,
    cap: keyof Pick<Plan, 'max_api_keys' | 'max_service_accounts' | 'max_webhooks'>,
    what: string,
    id: string,
    create: () => Promise<unknown>,
  ): Promise<void> {
    const max = plans[tenant.plan][cap];
    const active = async (): Promise<T[]> => (await readAll<T>(kv, tenantKey(tenant.slug, '>'))).filter((r) => !r.revoked_at);
    const refused = new ControlError('limit_reached', `This tenant holds ${max} ${what}, as many as the ${tenant.plan} plan allows; revoke or delete one first`);
    if ((await active()).length >= max) throw refused;
    await create();
    if ((await active()).length > max) {
      await kv.purge(tenantKey(tenant.slug, id));
      throw refused;
    }
  }

  async createApiKey(input: { tenant: string; name: string; environment: Environment }): Promise<ApiKeyCreated> {
    checkText(input.name, 'name');
    check(environments.includes(input.environment), `environment must be one of ${environments.join(', ')}`);
    const tenant = await this.requireTenant(input.tenant);
    const key = keyPrefixes[input.environment] + randomString(base62, 32);
    const record: ApiKeyRecord = {
      id: `key_${randomBytes(10).toString('hex')}`,
      tenant: input.tenant,
      name: input.name.trim(),
      environment: input.environment,
      scope: 'ingest:write',
      prefix: key.slice(0, keyPrefixes[input.environment].length + 4),
      key_hash: sha256Hex(key),
      created_at: new Date().toISOString(),
      revoked_at: null,
    };
    await this.withinCap<ApiKeyRecord>(this.apiKeys, tenant, 'max_api_keys', 'active API keys', record.id, () => this.apiKeys.create(tenantKey(tenant.slug, record.id), encodeRecord(record)));
    const { id, name, environment, scope, prefix, created_at } = record;
    return { id, name, environment, scope, prefix, key, created_at };
  }

  async listApiKeys(tenant: string): Promise<Array<Omit<ApiKeyRecord, 'key_hash' | 'tenant'>>> {
    return (await this.listOf<ApiKeyRecord>(this.apiKeys, tenant)).map(({ key_hash: _h, tenant: _t, ...view }) => view);
  }

  /** Revoking twice answers the first revocation time; another tenant's key is "not found". */
  revokeApiKey(tenant: string, id: string): Promise<{ id: string; revoked_at: string }> {
    return this.revoke(this.apiKeys, 'API key', /^key_[0-9a-f]{20}$/, tenant, id);
  }

  async createServiceAccount(input: { tenant: string; name: string; scopes: string[]; created_by: string; expires_at: string; id: string }): Promise<ServiceAccountRecord> {
    checkText(input.name, 'name');
    const tenant = await this.requireTenant(input.tenant);
    const record: ServiceAccountRecord = { ...input, name: input.name.trim(), created_at: new Date().toISOString(), revoked_at: null };
    await this.withinCap<ServiceAccountRecord>(this.serviceAccounts, tenant, 'max_service_accounts', 'active service accounts', record.id, () =>
      this.serviceAccounts.create(tenantKey(tenant.slug, record.id), encodeRecord(record)),
    );
    return record;
  }

  /** A webhook endpoint, within the plan's cap (the store checks the rest). */
  async createWebhook(tenant: string, input: WebhookInput): Promise<WebhookRecord> {
    const t = await this.requireTenant(tenant);
    const record = this.webhooks.prepare(tenant, input);
    await this.withinCap<WebhookRecord>(this.webhooks.kv, t, 'max_webhooks', 'webhook endpoints', record.id, () => this.webhooks.insert(record));
    return record;
  }

  listServiceAccounts(tenant: string): Promise<ServiceAccountRecord[]> {
    return this.listOf<ServiceAccountRecord>(this.serviceAccounts, tenant);
  }

  revokeServiceAccount(tenant: string, id: string): Promise<{ id: string; revoked_at: string }> {
    return this.revoke(this.serviceAccounts, 'service account', serviceAccountIdPattern, tenant, id);
  }

  /** A tenant's records of a bucket, newest first. */
  private async listOf<T extends { tenant: string; created_at: string }>(kv: KV, tenant: string): Promise<T[]> {
    await this.requireTenant(tenant);
    return (await readAll<T>(kv, tenantKey(tenant, '>'))).sort((a, b) => b.created_at.localeCompare(a.created_at));
  }

  /** Set `revoked_at` once, with compare-and-set; another tenant's record is "not found". */
  private async revoke(kv: KV, what: string, idPattern: RegExp, tenant: string, id: string): Promise<{ id: string; revoked_at: string }> {
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
}
