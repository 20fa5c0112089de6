import type { PlanName } from './plans.js';

// Records stored as JSON in the control-plane KV buckets (docs/control-plane.md).

export type TenantStatus = 'active' | 'inactive';
export type Role = 'owner' | 'admin' | 'viewer';
export type Environment = 'production' | 'staging' | 'development';

export const roles: readonly Role[] = ['owner', 'admin', 'viewer'];
export const environments: readonly Environment[] = ['production', 'staging', 'development'];
export const keyPrefixes: Readonly<Record<Environment, string>> = {
  production: 'dk_live_',
  staging: 'dk_stg_',
  development: 'dk_dev_',
};

export interface TenantRecord {
  slug: string;
  name: string;
  plan: PlanName;
  status: TenantStatus;
  /** Overrides the plan's monthly event quota when set. */
  monthly_quota: number | null;
  /** Overrides the plan's ingest rate when set. */
  rate_per_minute: number | null;
  /** Overrides of config/alerts.json (docs/alerts.md), absent when none. */
  alert_thresholds?: Record<string, Record<string, number>> | null;
  created_at: string;
  updated_at: string;
}

/**
 * Whether a tenant is suspended (`inactive`): ingest, the API and webhook deliveries refuse or hold its work. A tenant
 * not (yet) seen by a watcher is not suspended: its own record decides once it arrives.
 */
export const suspended = (tenant: TenantRecord | undefined): boolean =>
  tenant !== undefined && tenant.status !== 'active';

export interface UserRecord {
  id: number;
  tenant: string;
  email: string;
  role: Role;
  password_hash: string;
  created_at: string;
  /** Tokens carry the version they were issued under (`sv`); raising it signs the user out everywhere. Absent: 0. */
  session_version?: number;
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

/** The categories of the seed an endpoint can subscribe to; `test.ping` (the test endpoint) is sent regardless. */
export const webhookCategories = [
  'qos.rebuffer_spike',
  'qos.startup_regression',
  'qos.error_spike',
  'billing.payment_failure',
  'billing.churn_spike',
  'ingest.quota_80pct',
  'ingest.quota_exceeded',
  'content.new_release_detected',
  'content.completion_drop',
] as const;
export type WebhookCategory = (typeof webhookCategories)[number];
export type WebhookFormat = 'json' | 'slack';

export interface WebhookRecord {
  /** `wh_<20 hex>`. */
  id: string;
  tenant: string;
  url: string;
  categories: WebhookCategory[];
  format: WebhookFormat;
  enabled: boolean;
  /** `whsec_` + 32 random bytes, base64 (Standard Webhooks' form): the HMAC key. */
  secret: string;
  /** The secret before the last rotation; it also signs until `previous_secret_until`. */
  previous_secret: string | null;
  previous_secret_until: string | null;
  description: string;
  created_at: string;
  updated_at: string;
  /** When the endpoint was last disabled (by failures or by hand); null while enabled. */
  disabled_at: string | null;
}
