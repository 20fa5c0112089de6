// The API's answers the dashboard reads (docs/openapi.json is the full description).
export type RangeName = '24h' | '7d' | '30d' | 'qtd';

export interface Overview {
  monthly_active_users: number;
  watch_hours: number;
  paid_subscribers: number;
  arpu_inr: number;
  churn_pct: number;
  wow_delta: { mau: number; watch_hours: number; subs: number; revenue: number };
}

export interface ConcurrencySeries {
  interval_minutes: number;
  points: Array<{ ts: string; value: number }>;
  peak: number;
  peak_at: string;
}

export interface TopContentItem {
  content_id: string;
  title: string;
  content_type: string;
  watch_hours: number;
  completion_pct: number;
  unique_viewers: number;
}

export interface GeoItem {
  region: string;
  watch_hours: number;
  viewers: number;
  share_pct: number;
}

export interface QosItem {
  region: string;
  watch_hours: number;
  rebuffer_rate: number;
  startups: number;
  startup_p50_ms: number;
  startup_p95_ms: number;
  sessions_started: number;
  fatal_sessions: number;
  error_rate: number;
}

export interface DeviceItem {
  device: string;
  sessions: number;
  share_pct: number;
}

export type Severity = 'critical' | 'warning' | 'info';

export interface Alert {
  id: number;
  severity: Severity;
  source: string;
  category: string;
  title: string;
  description: string;
  data: Record<string, unknown>;
  acknowledged: boolean;
  acknowledged_at: string | null;
  created_at: string;
  resolved_at: string | null;
}

export interface ApiKey {
  id: string;
  name: string;
  environment: string;
  scope: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface ApiKeyCreated extends Omit<ApiKey, 'last_used_at' | 'revoked_at'> {
  key: string;
}

export interface ServiceAccount {
  id: string;
  name: string;
  scopes: string[];
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
}

export interface Webhook {
  id: string;
  url: string;
  categories: string[];
  format: 'json' | 'slack';
  enabled: boolean;
  description: string;
  created_at: string;
  updated_at: string;
  disabled_at: string | null;
}

export interface WebhookAttempt {
  id: string;
  delivery_id: string;
  event_id: string;
  type: string;
  attempt: number;
  status: string;
  response_code: number | null;
  latency_ms: number | null;
  error: string | null;
  request_body: string;
  created_at: string;
  next_attempt_at: string | null;
}

export interface Export {
  export_id: string;
  status: 'pending' | 'ready' | 'failed';
  url: string | null;
  expires_at: string | null;
  rows: number | null;
  bytes: number | null;
  from: string;
  to: string;
  event_types: string[];
  created_at: string;
  finished_at: string | null;
  error: string | null;
}

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
