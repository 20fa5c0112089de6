import { createHmac } from 'node:crypto';
import type { WebhookRecord } from '../control/records.js';

/** `sha256=` and the lowercase hex HMAC-SHA256 of the exact body bytes (the seed's X-Service-Signature). */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

/**
 * Standard Webhooks' `v1,` signature (the scheme of Svix): base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the
 * bytes the secret's base64 after `whsec_` encodes. It covers the timestamp, so a receiver can refuse a replayed
 * old delivery (docs/webhooks.md).
 */
export function timedSignature(secret: string, id: string, seconds: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${seconds}.${body}`, 'utf8').digest('base64')}`;
}

/** The headers of one attempt; during a rotation the old secret signs too. `now` in ms. */
export function deliveryHeaders(
  endpoint: Pick<WebhookRecord, 'secret' | 'previous_secret' | 'previous_secret_until'>,
  deliveryId: string,
  body: string,
  now: number,
): Record<string, string> {
  const seconds = Math.floor(now / 1000);
  const secrets = [endpoint.secret];
  const rotating =
    endpoint.previous_secret && endpoint.previous_secret_until && Date.parse(endpoint.previous_secret_until) > now;
  if (rotating) secrets.push(endpoint.previous_secret as string);
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': 'Darshak-Webhooks/1',
    'X-Service-Signature': signature(endpoint.secret, body),
    'X-Service-Delivery': deliveryId,
    'X-Service-Timestamp': String(seconds),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(seconds),
    'webhook-signature': secrets.map((s) => timedSignature(s, deliveryId, seconds, body)).join(' '),
  };
  if (rotating) headers['X-Service-Signature-Previous'] = signature(endpoint.previous_secret as string, body);
  return headers;
}
