// CONTRACT §8. A tenant's own `monthly_quota` / `rate_per_minute` override its plan's.
export const planNames = ['free', 'pro', 'enterprise'] as const;
export type PlanName = (typeof planNames)[number];

export interface Plan {
  monthly_events: number;
  rate_per_minute: number;
  export: boolean;
  /** Requests per minute at the api listener, all of the tenant's tokens together (docs/limits.md). */
  api_rate_per_minute: number;
  /** Active (not revoked) ingest keys, webhook endpoints and service accounts a tenant may hold at once. */
  max_api_keys: number;
  max_webhooks: number;
  max_service_accounts: number;
}

export const plans: Readonly<Record<PlanName, Plan>> = {
  free: {
    monthly_events: 1_000_000,
    rate_per_minute: 120_000,
    export: false,
    api_rate_per_minute: 600,
    max_api_keys: 10,
    max_webhooks: 5,
    max_service_accounts: 5,
  },
  pro: {
    monthly_events: 50_000_000,
    rate_per_minute: 120_000,
    export: false,
    api_rate_per_minute: 3_000,
    max_api_keys: 50,
    max_webhooks: 20,
    max_service_accounts: 20,
  },
  enterprise: {
    monthly_events: 1_000_000_000,
    rate_per_minute: 600_000,
    export: true,
    api_rate_per_minute: 12_000,
    max_api_keys: 200,
    max_webhooks: 50,
    max_service_accounts: 100,
  },
};

/** The limit that applies to requests whose key is unknown (they still get RateLimit-* headers). */
export const defaultRatePerMinute = plans.free.rate_per_minute;
