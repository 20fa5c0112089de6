import { randomBytes } from 'node:crypto';
import type { KV } from 'nats';
import { ControlError, decodeRecord, encodeRecord, readAll, tenantKey } from './kv-records.js';
import { webhookCategories, type WebhookCategory, type WebhookFormat, type WebhookRecord } from './records.js';

export const webhookIdPattern = /^wh_[0-9a-f]{20}$/;
/** How long the secret before a rotation keeps signing (X-Service-Signature-Previous). */
export const previousSecretMs = 24 * 3_600_000;
export const maxUrlLength = 2048;
export const maxDescriptionLength = 500;

export interface WebhookInput {
  url: string;
  categories: string[];
  description?: string;
  format?: string;
}

export interface WebhookPatch {
  url?: string;
  categories?: string[];
  description?: string;
  enabled?: boolean;
}

export const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

const invalid = (message: string): ControlError => new ControlError('invalid_request', message);

/** An http(s) URL of at most 2048 characters; where it may point is the SSRF guard's to judge (api routes, delivery). */
export function checkUrl(url: string): URL {
  if (url.length > maxUrlLength) throw invalid(`url must be at most ${maxUrlLength} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('url must be an absolute http or https URL');
  }
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.hostname === '')
    throw invalid('url must be an absolute http or https URL');
  return parsed;
}

export function checkCategories(categories: string[]): WebhookCategory[] {
  const unique = [...new Set(categories)];
  const bad = unique.find((c) => !(webhookCategories as readonly string[]).includes(c));
  if (unique.length === 0 || bad !== undefined)
    throw invalid(`categories must be a non-empty list of ${webhookCategories.join(', ')}`);
  return unique as WebhookCategory[];
}

function checkDescription(description: string): string {
  if (description.length > maxDescriptionLength)
    throw invalid(`description must be at most ${maxDescriptionLength} characters`);
  return description;
}

/** A Slack incoming-webhook URL always means the Slack format, whatever was asked. */
function formatOf(url: URL, asked: string | undefined): WebhookFormat {
  if (url.hostname === 'hooks.slack.com') return 'slack';
  if (asked === undefined || asked === 'json' || asked === 'slack') return asked ?? 'json';
  throw invalid('format must be json or slack');
}

/** Webhook endpoints in the `<prefix>_webhooks` bucket, one record per endpoint, changed by compare-and-set. */
export class WebhookStore {
  constructor(
    readonly kv: KV,
    private readonly now: () => number = Date.now,
  ) {}

  async create(tenant: string, input: WebhookInput): Promise<WebhookRecord> {
    return this.insert(this.prepare(tenant, input));
  }

  /** A new endpoint's record, checked, not yet stored. */
  prepare(tenant: string, input: WebhookInput): WebhookRecord {
    const url = checkUrl(input.url);
    const at = new Date(this.now()).toISOString();
    const record: WebhookRecord = {
      id: `wh_${randomBytes(10).toString('hex')}`,
      tenant,
      url: input.url,
      categories: checkCategories(input.categories),
      format: formatOf(url, input.format),
      enabled: true,
      secret: newSecret(),
      previous_secret: null,
      previous_secret_until: null,
      description: checkDescription(input.description ?? ''),
      created_at: at,
      updated_at: at,
      disabled_at: null,
    };
    return record;
  }

  async insert(record: WebhookRecord): Promise<WebhookRecord> {
    await this.kv.create(tenantKey(record.tenant, record.id), encodeRecord(record));
    return record;
  }

  /** The tenant's endpoints, newest first. */
  async list(tenant: string): Promise<WebhookRecord[]> {
    return (await readAll<WebhookRecord>(this.kv, tenantKey(tenant, '>'))).sort((a, b) =>
      b.created_at.localeCompare(a.created_at),
    );
  }

  /** Whether any tenant has an endpoint of this id. */
  async exists(id: string): Promise<boolean> {
    return webhookIdPattern.test(id) && (await readAll<WebhookRecord>(this.kv, tenantKey('*', id))).length > 0;
  }

  /** Another tenant's endpoint is "not found", as is a malformed id. */
  async get(tenant: string, id: string): Promise<WebhookRecord> {
    return (await this.read(tenant, id)).record;
  }

  private async read(tenant: string, id: string): Promise<{ record: WebhookRecord; revision: number }> {
    const missing = new ControlError('not_found', `webhook endpoint ${JSON.stringify(id)} does not exist`);
    if (!webhookIdPattern.test(id)) throw missing;
    const e = await this.kv.get(tenantKey(tenant, id));
    if (!e || e.operation !== 'PUT') throw missing;
    const record = decodeRecord<WebhookRecord>(e.value);
    if (record.tenant !== tenant) throw missing;
    return { record, revision: e.revision };
  }

  /**
   * Read, change, write back only if nobody wrote meanwhile; `change` answers null to leave the record as it is.
   * Answers the record and whether this call wrote it (the disable that sends the one e-mail is the one that wrote).
   */
  private async modify(
    tenant: string,
    id: string,
    change: (r: WebhookRecord) => WebhookRecord | null,
  ): Promise<{ record: WebhookRecord; changed: boolean }> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const { record, revision } = await this.read(tenant, id);
      const next = change(structuredClone(record));
      if (next === null) return { record, changed: false };
      next.updated_at = new Date(this.now()).toISOString();
      try {
        await this.kv.update(tenantKey(tenant, id), encodeRecord(next), revision);
        return { record: next, changed: true };
      } catch {
        // Changed meanwhile: read again.
      }
    }
    throw new Error(`webhook endpoint ${id} kept changing during the update`);
  }

  async update(tenant: string, id: string, patch: WebhookPatch): Promise<WebhookRecord> {
    const url = patch.url === undefined ? undefined : checkUrl(patch.url);
    const categories = patch.categories === undefined ? undefined : checkCategories(patch.categories);
    const description = patch.description === undefined ? undefined : checkDescription(patch.description);
    const { record } = await this.modify(tenant, id, (r) => {
      if (url && patch.url !== undefined) {
        r.url = patch.url;
        if (url.hostname === 'hooks.slack.com') r.format = 'slack';
      }
      if (categories) r.categories = categories;
      if (description !== undefined) r.description = description;
      if (patch.enabled === true && !r.enabled) {
        r.enabled = true;
        r.disabled_at = null;
      } else if (patch.enabled === false && r.enabled) {
        r.enabled = false;
        r.disabled_at = new Date(this.now()).toISOString();
      }
      return r;
    });
    return record;
  }

  /** Disable an enabled endpoint; `changed` is true only for the call that did it. */
  disable(tenant: string, id: string): Promise<{ record: WebhookRecord; changed: boolean }> {
    return this.modify(tenant, id, (r) => {
      if (!r.enabled) return null;
      r.enabled = false;
      r.disabled_at = new Date(this.now()).toISOString();
      return r;
    });
  }

  /** A new secret; the current one keeps signing, as the previous, for 24 h. */
  async rotateSecret(tenant: string, id: string): Promise<WebhookRecord> {
    const { record } = await this.modify(tenant, id, (r) => {
      r.previous_secret = r.secret;
      r.previous_secret_until = new Date(this.now() + previousSecretMs).toISOString();
      r.secret = newSecret();
      return r;
    });
    return record;
  }

  async delete(tenant: string, id: string): Promise<{ id: string; deleted_at: string }> {
    const { revision } = await this.read(tenant, id);
    await this.kv.delete(tenantKey(tenant, id), { previousSeq: revision });
    return { id, deleted_at: new Date(this.now()).toISOString() };
  }
}
