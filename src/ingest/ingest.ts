import { Counter } from 'prom-client';
import type { EventPublisher, ShardPart } from '../bus/publisher.js';
import { encodeEvent, partitionKey, passedFields, shardOf, type PassedFields, type WireEvent } from '../bus/wire.js';
import type { RequestErrorCode } from '../errors.js';
import { clientAddress } from '../http/address.js';
import type { HttpRequest } from '../http/types.js';
import { secondsToNextMinute, type RateState } from '../http/rate-limit.js';
import { registry } from '../metrics.js';
import { ok } from '../result.js';
import { sha256Hex } from '../control/kv-records.js';
import { defaultRatePerMinute, plans } from '../control/plans.js';
import { suspended, type ApiKeyRecord, type TenantRecord } from '../control/records.js';
import type { UsageCounters } from '../control/usage.js';
import type { KeyUsage } from '../control/key-usage.js';
import type { WatchedMap } from '../control/watched-map.js';
import {
  parseBatch,
  reject,
  shapeBatch,
  utf8,
  type AnswerError,
  type Batch,
  type LineError,
  type Step,
} from './batch.js';
import { decodeReport, reportEvent } from './cmcd.js';
import type { Enricher } from './enrich.js';
import type { LoadShedder } from './load-shedder.js';
import { stampTimes } from './timestamps.js';
import { surrogateEscape, validateEvent, type ClientEvent } from './validate.js';

const ingested = new Counter({
  name: 'darshak_ingest_events_total',
  help: 'Events received at ingest by outcome',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

/** Where an ingest request comes from; each reads its body its own way and answers through its own route. */
export type IngestSource = 'events' | 'beacon' | 'cmcd';

export interface IngestAnswer {
  accepted: number;
  rejected: number;
  queued: boolean;
  errors: Array<AnswerError | LineError>;
  /** CMCD only: reports understood that feed no metric (mute, ads, ...), neither accepted nor rejected. */
  ignored?: number;
}

export type IngestOutcome =
  | { kind: 'answer'; answer: IngestAnswer; rate: RateState }
  | {
      kind: 'reject';
      code: RequestErrorCode;
      message?: string;
      details?: unknown[];
      rate: RateState;
      events: number;
      retryAfterSeconds?: number;
    };

export interface IngestDeps {
  keys: WatchedMap<ApiKeyRecord>;
  tenants: WatchedMap<TenantRecord>;
  usage: UsageCounters;
  keyUsage: KeyUsage;
  publisher: EventPublisher;
  enricher: Enricher;
  /** Sheds load while the pipeline is behind (beacons excepted: a page that is gone cannot send again). */
  shedder?: LoadShedder;
  shards: number;
  trustProxy: boolean;
}

interface Caller {
  key: ApiKeyRecord;
  tenant: TenantRecord;
}

// Only fields the client sent are copied: absent stays absent on the wire, rather than becoming undefined.
function copyField<K extends keyof PassedFields>(from: PassedFields, to: PassedFields, field: K): void {
  if (from[field] !== undefined) to[field] = from[field];
}

export function rateOf(tenant: TenantRecord | null, used: number, now: number): RateState {
  const limit = tenant ? (tenant.rate_per_minute ?? plans[tenant.plan].rate_per_minute) : defaultRatePerMinute;
  return { limit, remaining: Math.max(0, limit - used), resetSeconds: secondsToNextMinute(now) };
}

// Decoding is stateless between whole-buffer calls: one decoder serves every request.

/**
 * SHA-256 of keys that matched a record, so a client sending the same key on every request costs one Map lookup
 * instead of a hash. Only hashes that were found are kept (a flood of made-up keys cannot fill it); the record is
 * still looked up on every request, so revocation takes effect as before.
 */
const knownKeyHashes = new Map<string, string>();
const knownKeyHashesMax = 10_000;

function keyFrom(req: HttpRequest, allowQuery: boolean): string | undefined {
  const header = req.header('x-api-key');
  if (header) return header.trim();
  const auth = req.header('authorization');
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1];
  }
  return allowQuery ? (req.query.get('api_key') ?? undefined) : undefined;
}

export class Ingest {
  constructor(private readonly deps: IngestDeps) {}

  authenticate(req: HttpRequest, allowQuery: boolean): Step<Caller> {
    const plaintext = keyFrom(req, allowQuery);
    if (!plaintext || plaintext.length > 200)
      return reject('invalid_api_key', plaintext ? undefined : 'API key missing: send it as X-API-Key');
    let hash = knownKeyHashes.get(plaintext);
    if (hash === undefined) {
      hash = sha256Hex(plaintext);
      if (this.deps.keys.get(hash)) {
        if (knownKeyHashes.size >= knownKeyHashesMax) knownKeyHashes.clear();
        knownKeyHashes.set(plaintext, hash);
      }
    }
    const key = this.deps.keys.get(hash);
    if (!key || key.revoked_at !== null) return reject('invalid_api_key');
    const tenant = this.deps.tenants.get(key.tenant);
    if (!tenant) return reject('invalid_api_key');
    if (suspended(tenant)) return reject('tenant_inactive');
    return ok({ key, tenant });
  }

  /** Quota and rate are checked against what is already counted: a batch admitted below a limit is admitted whole. */
  admit(caller: Caller, now: number): Step<RateState> {
    const { tenant } = caller;
    const rate = rateOf(tenant, this.deps.usage.minuteUsed(tenant.slug, now), now);
    const quota = tenant.monthly_quota ?? plans[tenant.plan].monthly_events;
    if (this.deps.usage.monthUsed(tenant.slug, now) >= quota)
      return reject('quota_exceeded', `The monthly quota of ${quota} events is used up`);
    if (rate.remaining <= 0)
      return reject(
        'rate_limited',
        `Rate limit of ${rate.limit} events per minute reached; retry in ${rate.resetSeconds} s`,
      );
    return ok(rate);
  }

  clientIp(req: HttpRequest): string {
    return clientAddress(req, this.deps.trustProxy);
  }

  build(
    caller: Caller,
    events: ClientEvent[],
    req: HttpRequest,
    receivedAt: number,
    serverTs: boolean,
    sentAt: number | null,
  ): WireEvent[] {
    const stamps = stampTimes(
      events.map((e) => e.ts),
      receivedAt,
      serverTs,
      sentAt,
    );
    const requestIp = this.clientIp(req);
    const requestUa = req.header('user-agent') ?? '';
    const { enricher } = this.deps;
    return events.map((e, i) => {
      const ctx = e.context;
      const geo =
        ctx?.country !== undefined || ctx?.region !== undefined
          ? { country: (ctx.country ?? '').toUpperCase(), region: ctx.region ?? '' }
          : enricher.geoOfIp(ctx?.ip ?? requestIp);
      const device = ctx?.device_type ?? enricher.deviceOfUserAgent(ctx?.user_agent ?? requestUa);
      const stamp = stamps[i] as (typeof stamps)[number];
      const w: WireEvent = {
        tenant: caller.tenant.slug,
        env: caller.key.environment,
        event_type: e.event_type,
        ts: stamp.ts,
        client_ts: stamp.client_ts,
        received_at: receivedAt,
        country: geo.country,
        region: geo.region,
        device,
      };
      if (e.event_id !== undefined) w.event_id = e.event_id.toLowerCase();
      for (const field of passedFields) copyField(e, w, field);
      return w;
    });
  }

  /** Publish every event; resolve which of them JetStream acknowledged. */
  async publish(events: WireEvent[]): Promise<boolean[]> {
    const parts = new Map<number, { part: ShardPart; positions: number[] }>();
    events.forEach((e, i) => {
      const shard = shardOf(e.tenant, partitionKey(e), this.deps.shards);
      let p = parts.get(shard);
      if (!p) {
        p = { part: { shard, encoded: [], bytes: 0 }, positions: [] };
        parts.set(shard, p);
      }
      const bytes = encodeEvent(e);
      p.part.encoded.push(bytes);
      p.part.bytes += bytes.length;
      p.positions.push(i);
    });
    const acked = new Array<boolean>(events.length).fill(false);
    await Promise.all(
      [...parts.values()].map(async ({ part, positions }) => {
        const result = await this.deps.publisher.submit(part);
        result.forEach((a, j) => (acked[positions[j] as number] = a));
      }),
    );
    return acked;
  }

  /** The whole ingest pipeline for one request. */
  async run(req: HttpRequest, source: IngestSource): Promise<IngestOutcome> {
    const receivedAt = Date.now();
    const auth = this.authenticate(req, source !== 'events');
    if (!auth.ok) return { kind: 'reject', ...auth.error, rate: rateOf(null, 0, receivedAt), events: 0 };
    const caller = auth.value;
    const admitted = this.admit(caller, receivedAt);
    // The body is read (not parsed) before these answers: answering while the client still sends a batch of ~230 KB
    // cuts the connection, and the client sees a network error instead of when to retry.
    if (!admitted.ok) {
      await req.body();
      return {
        kind: 'reject',
        ...admitted.error,
        rate: rateOf(caller.tenant, this.deps.usage.minuteUsed(caller.tenant.slug, receivedAt), receivedAt),
        events: 0,
      };
    }
    const shed = source === 'beacon' ? undefined : this.deps.shedder?.admit(caller.tenant.slug);
    if (shed && !shed.ok) {
      await req.body();
      return {
        kind: 'reject',
        code: 'ingest_overloaded',
        rate: admitted.value,
        events: 0,
        retryAfterSeconds: shed.error.retryAfterSeconds,
      };
    }

    const batch = source === 'cmcd' ? await this.readReports(req) : await this.readBatch(req, source === 'beacon');
    const currentRate = (): RateState =>
      rateOf(caller.tenant, this.deps.usage.minuteUsed(caller.tenant.slug, receivedAt), receivedAt);
    if (!batch.ok) return { kind: 'reject', ...batch.error, rate: currentRate(), events: 0 };

    const { events, sentAt, mayHaveSurrogates, cmcd } = batch.value;
    const valid: ClientEvent[] = [];
    const validIndex: number[] = [];
    const errors: AnswerError[] = [];
    events.forEach((raw, index) => {
      const r = validateEvent(raw, index, mayHaveSurrogates);
      if (r.ok) {
        valid.push(r.value);
        validIndex.push(index);
      } else errors.push(r.error);
    });
    // CMCD counts reports: a line either became an event, failed, or was ignored.
    const submitted = cmcd ? cmcd.reports - cmcd.ignored : events.length;
    const answered = (list: AnswerError[]): IngestAnswer['errors'] =>
      cmcd
        ? [...cmcd.errors, ...list.map((e) => ({ line: cmcd.lines[e.index]!, code: e.code, message: e.message }))].sort(
            (a, b) => a.line - b.line,
          )
        : list;
    if (valid.length === 0) {
      ingested.inc({ outcome: 'rejected' }, submitted);
      if (cmcd && submitted === 0)
        return {
          kind: 'answer',
          answer: { accepted: 0, rejected: 0, queued: false, errors: [], ignored: cmcd.ignored },
          rate: currentRate(),
        };
      return {
        kind: 'reject',
        code: 'validation_failed',
        details: answered(errors),
        rate: currentRate(),
        events: submitted,
      };
    }

    this.deps.shedder?.charge(caller.tenant.slug, valid.length);
    const serverTs = req.query.get('server_ts') === '1';
    const wire = this.build(caller, valid, req, receivedAt, serverTs, sentAt);
    // Count before publishing so concurrent requests see each other; take back what is not acknowledged.
    this.deps.usage.add(caller.tenant.slug, wire.length, receivedAt);
    const acked = await this.publish(wire);
    const accepted = acked.filter(Boolean).length;
    this.deps.usage.remove(caller.tenant.slug, wire.length - accepted, receivedAt);
    if (accepted > 0) this.deps.keyUsage.touch(caller.key.id, receivedAt);
    if (accepted === 0) {
      ingested.inc({ outcome: 'rejected' }, submitted);
      return { kind: 'reject', code: 'ingest_degraded', rate: currentRate(), events: submitted };
    }
    acked.forEach((a, j) => {
      if (!a)
        errors.push({
          index: validIndex[j] as number,
          code: 'ingest_degraded',
          message: 'The event bus did not acknowledge this event; send it again',
        });
    });
    errors.sort((a, b) => a.index - b.index);
    ingested.inc({ outcome: 'accepted' }, accepted);
    if (submitted > accepted) ingested.inc({ outcome: 'rejected' }, submitted - accepted);
    const answer: IngestAnswer = { accepted, rejected: submitted - accepted, queued: true, errors: answered(errors) };
    if (cmcd) answer.ignored = cmcd.ignored;
    return { kind: 'answer', answer, rate: currentRate() };
  }

  /**
   * A CMCD event-mode POST: one report per line (`application/cmcd`, or `text/plain` as sendBeacon sends it), or a
   * JSON array of reports as objects. Each report becomes at most one event (cmcd.ts `reportEvent`); a line that does
   * not decode is rejected on its own.
   */
  private async readReports(req: HttpRequest): Promise<Step<Batch>> {
    const type = (req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const json = type === 'application/json';
    if (!json && type !== 'application/cmcd' && type !== 'text/plain') {
      await req.body();
      return reject('unsupported_media_type');
    }
    const body = await req.body();
    if (!body.ok)
      return body.error === 'too_large'
        ? reject('payload_too_large')
        : reject('invalid_body', 'The request body ended early');
    let text: string;
    try {
      text = utf8.decode(body.value);
    } catch {
      return reject('invalid_body', 'Request body is not valid UTF-8');
    }
    let reports: unknown[];
    if (json) {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (err) {
        return reject('invalid_json', `Request body is not valid JSON: ${(err as Error).message.slice(0, 200)}`);
      }
      if (!Array.isArray(value)) return reject('invalid_body', 'A JSON body of CMCD reports is an array of objects');
      reports = value;
    } else {
      reports = text.split('\n');
    }
    const batch: Batch = {
      events: [],
      sentAt: null,
      mayHaveSurrogates: json && surrogateEscape.test(text),
      cmcd: { lines: [], errors: [], reports: 0, ignored: 0 },
    };
    const cmcd = batch.cmcd!;
    reports.forEach((item, i) => {
      const line = i + 1;
      let report;
      if (typeof item === 'string') {
        const trimmed = item.endsWith('\r') ? item.slice(0, -1) : item;
        if (trimmed.trim() === '') return;
        cmcd.reports++;
        try {
          report = decodeReport(trimmed);
        } catch (err) {
          cmcd.errors.push({ line, code: 'invalid_report', message: `not a CMCD report: ${(err as Error).message}` });
          return;
        }
      } else {
        cmcd.reports++;
        if (item === null || typeof item !== 'object' || Array.isArray(item)) {
          cmcd.errors.push({ line, code: 'invalid_report', message: 'a CMCD report in a JSON array is an object' });
          return;
        }
        report = item as Parameters<typeof reportEvent>[0];
      }
      const mapped = reportEvent(report);
      if (mapped.kind === 'ignored') cmcd.ignored++;
      else if (mapped.kind === 'invalid') cmcd.errors.push({ line, code: 'invalid_report', message: mapped.message });
      else {
        batch.events.push(mapped.event);
        cmcd.lines.push(line);
      }
    });
    if (cmcd.reports === 0) return reject('invalid_body', 'No CMCD report in the body');
    return ok(batch);
  }

  private async readBatch(req: HttpRequest, beacon: boolean): Promise<Step<Batch>> {
    if (beacon) {
      const adata = req.query.get('adata');
      if (adata !== null) {
        let value: unknown;
        try {
          value = JSON.parse(adata);
        } catch (err) {
          return reject('invalid_json', `"adata" is not valid JSON: ${(err as Error).message.slice(0, 200)}`);
        }
        return shapeBatch(value, surrogateEscape.test(adata));
      }
    }
    const body = await req.body();
    if (!body.ok)
      return body.error === 'too_large'
        ? reject('payload_too_large')
        : reject('invalid_body', 'The request body ended early');
    return parseBatch(body.value);
  }
}
