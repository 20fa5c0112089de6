import type { PlanName } from './plans.js';

// Records stored as JSON in the control-plane KV buckets (docs/control-plane.md).

export type TenantStatus = 'active' | 'inactive';
export type Role = 'owner' | 'admin' | 'viewer';
export type Environment = 'production' | 'staging' | 'development';

export const roles: readonly Role[] = ['owner', 'admin', 'viewer'];
export const environments: readonly Environment[] = ['production', 'staging', 'development'];
export const keyPrefixes: Readonly<Record<Environment, string>> = { production: 'dk_live_', staging: 'dk_stg_', development: 'dk_dev_' };

export interface TenantRecord {
  slug: string;
  name: string;
  plan: PlanName;
  status: TenantStatus;
  /** Overrides the plan's monthly event quota when set. */
  monthly_quota: number | null;
  /** Overrides the plan's ingest rate when set. */
  rate_per_minute: number | null;
  created_at: string;
  updated_at: string;
}

export interface UserRecord {
  id: number;
  tenant: string;
  email: string;
  role: Role;
  password_hash: string;
  created_at: string;
}

export interface ApiKeyRecord {
  id: string;
  tenant: string;
  name: string;
  environment: Environment;
  scope: 'ingest:write';
  prefix: string;
  /** Hex SHA-256 of the plaintext key; the plaintext is never stored. */
  key_hash: string;
  created_at: string;
  revoked_at: string | null;
}

export interface ServiceAccountRecord {
  /** `sa_<20 hex>`; also the `sub` and `jti` of its one token. */
  id: string;
  tenant: string;
  name: string;
  scopes: string[];
  /** The user id that created it. */
  created_by: string;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
}
