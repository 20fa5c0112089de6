import { randomBytes, randomInt } from 'node:crypto';
import type { KV } from 'nats';
import { check, checkText, encodeRecord, listOf, revoke, sha256Hex, tenantKey, withinCap } from './kv-records.js';
import { environments, keyPrefixes, type ApiKeyRecord, type Environment, type TenantRecord } from './records.js';

const base62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function randomString(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
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

/** Ingest API keys, under their tenant in the API keys bucket: only their SHA-256 is kept; ingest watches them. */
export class ApiKeyStore {
  constructor(
    readonly kv: KV,
    private readonly requireTenant: (slug: string) => Promise<TenantRecord>,
  ) {}

  async create(input: { tenant: string; name: string; environment: Environment }): Promise<ApiKeyCreated> {
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
    await withinCap<ApiKeyRecord>(this.kv, tenant, 'max_api_keys', 'active API keys', record.id, () =>
      this.kv.create(tenantKey(tenant.slug, record.id), encodeRecord(record)),
    );
    const { id, name, environment, scope, prefix, created_at } = record;
    return { id, name, environment, scope, prefix, key, created_at };
  }

  async list(tenant: string): Promise<Array<Omit<ApiKeyRecord, 'key_hash' | 'tenant'>>> {
    return (await listOf<ApiKeyRecord>(this.kv, await this.requireTenant(tenant))).map(
      ({ key_hash: _h, tenant: _t, ...view }) => view,
    );
  }

  /** Revoking twice answers the first revocation time; another tenant's key is "not found". */
  revoke(tenant: string, id: string): Promise<{ id: string; revoked_at: string }> {
    return revoke(this.kv, 'API key', /^key_[0-9a-f]{20}$/, tenant, id);
  }
}
