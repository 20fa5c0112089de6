// CONTRACT §8. A tenant's own `monthly_quota` / `rate_per_minute` override its plan's.
export const planNames = ['free', 'pro', 'enterprise'] as const;
export type PlanName = (typeof planNames)[number];

export interface Plan {
  monthly_events: number;
  rate_per_minute: number;
  export: boolean;
}

export const plans: Readonly<Record<PlanName, Plan>> = {
  free: { monthly_events: 1_000_000, rate_per_minute: 120_000, export: false },
  pro: { monthly_events: 50_000_000, rate_per_minute: 120_000, export: false },
  enterprise: { monthly_events: 1_000_000_000, rate_per_minute: 600_000, export: true },
};

/** The limit that applies to requests whose key is unknown (they still get RateLimit-* headers). */
export const defaultRatePerMinute = plans.free.rate_per_minute;
