// Sends the fleet's requests to the real ingest API as player SDKs and a billing server would: batches to
// `/v1/ingest/events` with `sent_at`, page-unload beacons to `/v1/ingest/beacon`, a cap on requests in flight, and
// retries on 429 and 503 (and on a dropped connection) with exponential backoff and full jitter, honouring
// `Retry-After`. A beacon is not retried: a browser sends it once, as the page goes away (the soak retries it, to
// know every event's fate).

import type { Delivery } from './fleet.js';
import { sleep } from '../host.js';
import type { OracleEvent } from './oracle.js';

export interface SenderOptions {
  /** Ingest listeners, taken in turn (as a load balancer would). */
  ingestUrls: readonly string[];
  apiKey: string;
  /** Requests in flight at most. */
  concurrency: number;
  /** Attempts per batch before it is counted lost. */
  maxAttempts: number;
  /** Beacons retried as batches are, rather than sent once as a browser does. */
  retryBeacons: boolean;
}

export interface SendStats {
  requests: number;
  beacons: number;
  sent: number;
  accepted: number;
  rejected: number;
  lost: number;
  retries: Record<string, number>;
  /** Rejections by error code, from the answers' per-event `errors`. */
  rejections: Record<string, number>;
}

interface IngestAnswer {
  accepted?: number;
  queued?: boolean;
  errors?: Array<{ index?: number; code?: string }>;
}

/** An event as the ingest API takes it. */
export function toIngest(e: OracleEvent): Record<string, unknown> {
  const { tenant: _tenant, ts, event_id, event_type, properties, context, ...rest } = e;
  return {
    event_id,
    event_type,
    ts: new Date(ts).toISOString(),
    ...rest,
    ...(context ? { context: { ...context } } : {}),
    ...(properties ? { properties: structuredClone(properties) } : {}),
  };
}

export class Sender {
  readonly stats: SendStats = {
    requests: 0,
    beacons: 0,
    sent: 0,
    accepted: 0,
    rejected: 0,
    lost: 0,
    retries: {},
    rejections: {},
  };
  /** Every event the service accepted: the ground truth's input. */
  readonly accepted: OracleEvent[] = [];
  private inflight = 0;
  private readonly idle: Array<() => void> = [];

  constructor(private readonly o: SenderOptions) {}

  get busy(): number {
    return this.inflight;
  }

  /** Start sending; resolves once a slot is free (so a caller that awaits it is held back at the cap). */
  async send(d: Delivery): Promise<void> {
    while (this.inflight >= this.o.concurrency) await new Promise<void>((r) => this.idle.push(r));
    this.inflight++;
    void this.deliver(d).finally(() => {
      this.inflight--;
      this.idle.shift()?.();
    });
  }

  /** Wait for every request under way. */
  async drain(): Promise<void> {
    while (this.inflight > 0) await new Promise<void>((r) => this.idle.push(r));
  }

  private async deliver(d: Delivery): Promise<void> {
    // What is still to send: the batch, then those of its events ingest answered `ingest_degraded` (not acknowledged
    // by the bus, maybe stored: sent again, their ids make a second copy count once).
    let pending = d.events;
    let events = pending.map(toIngest);
    this.stats.sent += events.length;
    const beacon = d.via === 'beacon';
    if (beacon) this.stats.beacons++;
    for (let attempt = 1; ; attempt++) {
      this.stats.requests++;
      let status = 0;
      let retryAfter: string | null = null;
      let body: IngestAnswer = {};
      const ingestUrl = this.o.ingestUrls[this.stats.requests % this.o.ingestUrls.length];
      try {
        const res = beacon
          ? await fetch(`${ingestUrl}/v1/ingest/beacon?api_key=${encodeURIComponent(this.o.apiKey)}`, {
              method: 'POST',
              headers: { 'content-type': 'text/plain;charset=UTF-8' },
              body: JSON.stringify({ events, sent_at: new Date().toISOString() }),
            })
          : await fetch(`${ingestUrl}/v1/ingest/events`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-api-key': this.o.apiKey },
              body: JSON.stringify({ events, sent_at: new Date().toISOString() }),
            });
        status = res.status;
        retryAfter = res.headers.get('retry-after');
        body = (await res.json().catch(() => ({}))) as IngestAnswer;
      } catch {
        status = 0;
      }
      // A beacon always answers 200; `queued: false` says it was not kept.
      const answered = status === 200 && (body.queued !== false || !beacon);
      if (answered) {
        pending = this.settle(pending, body);
        if (pending.length === 0) return;
        events = pending.map(toIngest);
      }
      // A 200 here left events to send again (`ingest_degraded`), or was a beacon not kept.
      const retryable = status === 200 || status === 429 || status === 503 || status === 0;
      const reason = answered
        ? 'ingest_degraded'
        : status === 0
          ? 'network'
          : status === 200
            ? 'beacon not queued'
            : String(status);
      const once = beacon && !this.o.retryBeacons;
      if (!retryable || once || attempt >= this.o.maxAttempts) {
        if (retryable || once) this.stats.lost += events.length;
        else {
          this.stats.rejected += events.length;
          this.count(this.stats.rejections, body.errors?.[0]?.code ?? reason);
        }
        return;
      }
      this.count(this.stats.retries, reason);
      const backoff = Math.min(30_000, 250 * 2 ** (attempt - 1));
      const seconds = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : 0;
      // Full jitter over the backoff, never earlier than the server asked.
      await sleep(Math.max(seconds, Math.random() * backoff));
    }
  }

  /** A 200: every event is accepted except those its `errors` name by index; answers those to send again. */
  private settle(events: readonly OracleEvent[], body: IngestAnswer): OracleEvent[] {
    const refused = new Set<number>();
    const again = new Set<number>();
    for (const e of body.errors ?? []) {
      if (typeof e.index !== 'number') continue;
      if (e.code === 'ingest_degraded') again.add(e.index);
      else {
        refused.add(e.index);
        this.count(this.stats.rejections, e.code ?? 'unknown');
      }
    }
    events.forEach((e, i) => {
      if (!refused.has(i) && !again.has(i)) this.accepted.push(e);
    });
    this.stats.accepted += events.length - refused.size - again.size;
    this.stats.rejected += refused.size;
    return events.filter((_, i) => again.has(i));
  }

  private count(into: Record<string, number>, key: string): void {
    into[key] = (into[key] ?? 0) + 1;
  }
}
