import { createHmac } from 'node:crypto';
import type { WebhookRecord } from '../control/records.js';

/** `sha256=` and the lowercase hex HMAC-SHA256 of the exact body bytes (the seed's X-Service-Signature). */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

/** The headers of one attempt; during a rotation the old secret signs too. `now` in ms. */
export function deliveryHeaders(endpoint: Pick<WebhookRecord, 'secret' | 'previous_secret' | 'previous_secret_until'>, deliveryId: string, body: string, now: number): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': 'Darshak-Webhooks/1',
    'X-Service-Signature': signature(endpoint.secret, body),
    'X-Service-Delivery': deliveryId,
    'X-Service-Timestamp': String(Math.floor(now / 1000)),
  };
  if (endpoint.previous_secret && endpoint.previous_secret_until && Date.parse(endpoint.previous_secret_until) > now) {
    headers['X-Service-Signature-Previous'] = signature(endpoint.previous_secret, body);
  }
  return headers;
}
