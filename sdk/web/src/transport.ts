// Sending a page's events to Darshak's ingest: a bounded queue, batches every 10 s and at once when something
// important happens, retries that never count an event twice (each carries its `event_id`) and never come before
// `Retry-After`, and a beacon when the page goes away. No DOM: fetch, the beacon and the clock are handed in.

import type { SdkEvent } from './tracker.js';

export interface TransportOptions {
  ingestUrl: string;
  apiKey: string;
  fetch: typeof fetch;
  /** navigator.sendBeacon, when the page has it. */
  beacon?: (url: string, body: string) => boolean;
  newId(): string;
  now(): number;
  random(): number;
  /** Events kept while the network is away; past it, heartbeats go first. Default 1,000. */
  maxQueue?: number;
  /** What the transport could not deliver, and why (dropped or refused events); for the page's logs. */
  onError?: (message: string) => void;
}

/** An event with its id: the ingest de-duplicates by it, so a batch sent twice counts once. */
export type QueuedEvent = SdkEvent & { event_id: string };

/** Ingest's 200 answer (docs/ingest.md): per-event errors by their index in the batch. */
interface Answer {
  rejected?: number;
  errors?: Array<{ index: number; code: string }>;
}

/** Events per request: under the keepalive body limit of 64 KiB at a few hundred bytes each. */
export const batchSize = 100;
export const defaultMaxQueue = 1000;
/** Backoff: a random wait up to base × 2^attempt, capped (full jitter). */
export const backoffBaseMs = 1000;
export const backoffCapMs = 60_000;

export class Transport {
  private queue: QueuedEvent[] = [];
  private inFlight = false;
  /** No request before this time (a backoff or a Retry-After). */
  private notBefore = 0;
  private attempt = 0;
  private readonly maxQueue: number;

  constructor(private readonly o: TransportOptions) {
    this.maxQueue = o.maxQueue ?? defaultMaxQueue;
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Queue an event; past the bound the oldest heartbeat goes, else the oldest event. */
  add(e: SdkEvent): void {
    this.queue.push({ ...e, event_id: this.o.newId() });
    if (this.queue.length <= this.maxQueue) return;
    const beat = this.queue.findIndex((q) => q.event_type === 'heartbeat');
    const [dropped] = this.queue.splice(beat >= 0 ? beat : 0, 1);
    this.o.onError?.(`queue full: dropped a ${dropped!.event_type}`);
  }

  /** Send what is queued now, unless a request is out or a backoff holds; resolves when this attempt settles. */
  async flush(): Promise<void> {
    if (this.inFlight || this.queue.length === 0 || this.o.now() < this.notBefore) return;
    this.inFlight = true;
    const batch = this.queue.slice(0, batchSize);
    try {
      const r = await this.o.fetch(`${this.o.ingestUrl.replace(/\/+$/, '')}/v1/ingest/events`, {
        method: 'POST',
        // text/plain keeps the request simple; the key header still makes it a CORS preflight, which ingest answers.
        headers: { 'content-type': 'text/plain', 'x-api-key': this.o.apiKey },
        body: JSON.stringify({ sent_at: new Date(this.o.now()).toISOString(), events: batch }),
        keepalive: true,
      });
      if (r.ok || (r.status >= 400 && r.status < 500 && r.status !== 429 && r.status !== 408)) {
        // Accepted, or refused for good (a bad key, an invalid event): retrying would not change the answer. Except
        // events the bus did not take (`ingest_degraded` in a 200's errors): those stay, to go again after a backoff.
        const body = r.ok ? ((await r.json().catch(() => null)) as Answer | null) : null;
        const again = new Set<QueuedEvent>();
        for (const e of body?.errors ?? []) {
          const q = e.code === 'ingest_degraded' ? batch[e.index] : undefined;
          if (q) again.add(q);
        }
        this.queue = this.queue.filter((q) => !batch.includes(q) || again.has(q));
        const rejected = (body?.rejected ?? 0) - again.size;
        if (!r.ok) this.o.onError?.(`ingest refused ${batch.length} events: ${r.status}`);
        else if (rejected > 0) this.o.onError?.(`ingest rejected ${rejected} of ${batch.length} events`);
        if (again.size > 0) this.backoff(null);
        else this.attempt = 0;
        return;
      }
      this.backoff(r.headers.get('retry-after'));
    } catch {
      this.backoff(null);
    } finally {
      this.inFlight = false;
    }
  }

  /** The page goes away: everything queued, by beacon (it outlives the page), in batches. */
  beacon(): void {
    if (!this.o.beacon || this.queue.length === 0) return;
    const url = `${this.o.ingestUrl.replace(/\/+$/, '')}/v1/ingest/beacon?api_key=${encodeURIComponent(this.o.apiKey)}`;
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, batchSize);
      if (!this.o.beacon(url, JSON.stringify({ sent_at: new Date(this.o.now()).toISOString(), events: batch }))) return;
      this.queue = this.queue.slice(batch.length);
    }
  }

  private backoff(retryAfter: string | null): void {
    this.attempt++;
    const jitter = this.o.random() * Math.min(backoffCapMs, backoffBaseMs * 2 ** this.attempt);
    const seconds = retryAfter === null ? NaN : Number(retryAfter);
    const told = Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
    this.notBefore = this.o.now() + Math.max(told, jitter);
  }
}
