import type { KV } from 'nats';
import type { Bus } from '../bus/bus.js';
import { ApiKeyStore } from './api-keys.js';
import { check, checkText, ControlError, decodeRecord, encodeRecord, withinCap } from './kv-records.js';
import { planNames, type PlanName } from './plans.js';
import type { TenantRecord, TenantStatus, WebhookRecord } from './records.js';
import { ServiceAccountStore } from './service-accounts.js';
import { checkCredentials, UserStore, type UserView } from './users.js';
import { WebhookStore, type WebhookInput } from './webhook-store.js';

const slugPattern = /^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$/;

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

/**
 * The control plane in NATS KV, one store per bucket: tenants here, and their users, API keys, service accounts and
 * webhook endpoints. Every process reads the same state and watches its changes.
 */
export class ControlPlane {
  readonly users: UserStore;
  readonly apiKeys: ApiKeyStore;
  readonly serviceAccounts: ServiceAccountStore;

  private constructor(
    readonly tenants: KV,
    users: KV,
    apiKeys: KV,
    serviceAccounts: KV,
    readonly webhooks: WebhookStore,
  ) {
    const requireTenant = (slug: string): Promise<TenantRecord> => this.requireTenant(slug);
    this.users = new UserStore(users, requireTenant);
    this.apiKeys = new ApiKeyStore(apiKeys, requireTenant);
    this.serviceAccounts = new ServiceAccountStore(serviceAccounts, requireTenant);
  }

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
    check(
      slugPattern.test(input.slug),
      'slug must be 2 to 63 characters of a-z, 0-9 and "-", starting and ending with a letter or digit',
    );
    checkText(input.name, 'name');
    check(planNames.includes(input.plan), `plan must be one of ${planNames.join(', ')}`);
    checkCredentials(input.ownerEmail, input.ownerPassword);
    if (await this.users.findId(input.ownerEmail))
      throw new ControlError('already_exists', `a user with e-mail ${input.ownerEmail} already exists`);
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
      const owner = await this.users.add({
        tenant: input.slug,
        email: input.ownerEmail,
        password: input.ownerPassword,
        role: 'owner',
      });
      return { tenant_slug: tenant.slug, plan: tenant.plan, owner };
    } catch (err) {
      await this.tenants.delete(input.slug);
      throw err;
    }
  }

  async updateTenant(slug: string, patch: UpdateTenantInput): Promise<TenantRecord> {
    if (patch.plan !== undefined) check(planNames.includes(patch.plan), `plan must be one of ${planNames.join(', ')}`);
    if (patch.status !== undefined)
      check(patch.status === 'active' || patch.status === 'inactive', 'status must be active or inactive');
    if (patch.name !== undefined) checkText(patch.name, 'name');
    checkPositive(patch.monthly_quota, 'monthly-quota');
    checkPositive(patch.rate_per_minute, 'rate-per-minute');
    for (let attempt = 0; attempt < 10; attempt++) {
      const e = await this.tenants.get(slug);
      if (!e || e.operation !== 'PUT')
        throw new ControlError('not_found', `tenant ${JSON.stringify(slug)} does not exist`);
      const next: TenantRecord = {
        ...decodeRecord<TenantRecord>(e.value),
        ...patch,
        updated_at: new Date().toISOString(),
      };
      try {
        await this.tenants.update(slug, encodeRecord(next), e.revision);
        return next;
      } catch {
        // Someone else changed it meanwhile: read again.
      }
    }
    throw new Error(`tenant ${slug} kept changing during the update`);
  }

  /** A webhook endpoint, within the plan's cap (the store checks the rest). */
  async createWebhook(tenant: string, input: WebhookInput): Promise<WebhookRecord> {
    const t = await this.requireTenant(tenant);
    const record = this.webhooks.prepare(tenant, input);
    await withinCap<WebhookRecord>(this.webhooks.kv, t, 'max_webhooks', 'webhook endpoints', record.id, () =>
      this.webhooks.insert(record),
    );
    return record;
  }
}
