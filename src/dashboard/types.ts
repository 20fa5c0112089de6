// The API's answers the dashboard reads (docs/openapi.json is the full description). Shapes the server's own
// modules define are taken from them (types, or a plain constant), so the two cannot drift apart; only modules free of
// Node code, since the bundle and its type check are the browser's. The rest are the API's views as openapi.json has them.
import type { Alert as StoredAlert, Severity } from '../store/alerts.js';

export type { RangeName } from '../store/queries/range.js';
export type { QosItem } from '../../pipelines/qos/answer.js';
export type { BitrateItem } from '../../pipelines/bitrate/answer.js';
export type { ConcurrencySeries, DeviceItem, GeoItem, Overview, TopContentItem } from '../store/queries/answers.js';
export { webhookCategories, type Environment } from '../control/records.js';
export type { AttemptLog as WebhookAttempt } from '../contracts/webhook-attempt.js';
export type { Severity };

/** An alert as the API answers it; the API's severity is one of three. */
export interface Alert extends Omit<StoredAlert, 'severity'> {
  severity: Severity;
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
