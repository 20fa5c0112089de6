import type { KV } from 'nats';
import { checkText, encodeRecord, listOf, revoke, tenantKey, withinCap } from './kv-records.js';
import type { ServiceAccountRecord, TenantRecord } from './records.js';

export const serviceAccountIdPattern = /^sa_[0-9a-f]{20}$/;

/** Service accounts (the api's long-lived tokens), under their tenant in their bucket; every api process watches it. */
export class ServiceAccountStore {
  constructor(
    readonly kv: KV,
    private readonly requireTenant: (slug: string) => Promise<TenantRecord>,
  ) {}

  async create(input: {
    tenant: string;
    name: string;
    scopes: string[];
    created_by: string;
    expires_at: string;
    id: string;
  }): Promise<ServiceAccountRecord> {
    checkText(input.name, 'name');
    const tenant = await this.requireTenant(input.tenant);
    const record: ServiceAccountRecord = {
      ...input,
      name: input.name.trim(),
      created_at: new Date().toISOString(),
      revoked_at: null,
    };
    await withinCap<ServiceAccountRecord>(
      this.kv,
      tenant,
      'max_service_accounts',
      'active service accounts',
      record.id,
      () => this.kv.create(tenantKey(tenant.slug, record.id), encodeRecord(record)),
    );
    return record;
  }

  async list(tenant: string): Promise<ServiceAccountRecord[]> {
    return listOf<ServiceAccountRecord>(this.kv, await this.requireTenant(tenant));
  }

  revoke(tenant: string, id: string): Promise<{ id: string; revoked_at: string }> {
    return revoke(this.kv, 'service account', serviceAccountIdPattern, tenant, id);
  }
}
