import { Counter, Gauge } from 'prom-client';
import type { Bus } from '../bus/bus.js';
import { decodeFlushed } from '../bus/progress.js';
import { registry } from '../metrics.js';
import { fail, ok, type Result } from '../result.js';

// Overload is a normal state at a final's peak. Ingest measures how far behind the pipeline is (docs/ingest.md,
// "Overload"): for the messages this process published, the age of the oldest one whose events the flush role has
// not yet stored. Past a target lag it admits no more than the pipeline drains, less and less as the lag grows, and
// answers the rest 503 `ingest_overloaded` with Retry-After, without parsing their bodies. What it admits is shared
// max-min fairly between the tenants asking, so one tenant's surge does not shut out the others.

const lagGauge = new Gauge({
  name: 'darshak_ingest_pipeline_lag_seconds',
  help: 'Age of the oldest event this ingest process published that the store does not hold yet (0 when none is waiting)',
  registers: [registry],
});
const shedCounter = new Counter({
  name: 'darshak_ingest_shed_requests_total',
  help: 'Ingest requests answered 503 ingest_overloaded because the pipeline is behind',
  registers: [registry],
});

export interface ShedOptions {
  /** Lag past which admission is limited to what the pipeline drains; 0 never sheds. */
  targetLagMs: number;
  /** Lag at which nothing more is admitted. */
  maxLagMs: number;
}

/** How often the lag, the drain rate and the tenants' shares are worked out again. */
const tickMs = 250;
/** Without word from a flush role for this long, nothing is shed: the stream buffers while the pipeline restarts. */
const silentMs = 60_000;
/**
 * Nor while the bus is down (publishes are refused with `ingest_degraded` then), nor for this long after it came back:
 * the lag then measures the outage, not an overload, and the pipeline catches up once its readers are open again;
 * shedding would make a blip of the bus a longer outage for clients.
 */
const afterReconnectMs = 30_000;
/** Published messages remembered per shard at most (a pipeline that never answers must not grow this process). */
const maxOutstanding = 100_000;

/** Messages this process published that the store does not hold yet, in sequence order. */
class Outstanding {
  seqs: number[] = [];
  at: number[] = [];
  events: number[] = [];
  head = 0;

  add(seq: number, at: number, events: number): void {
    // Acknowledgements of a shard's messages in flight together may come out of order: keep sequence order.
    let i = this.seqs.length;
    while (i > this.head && this.seqs[i - 1]! > seq) i--;
    this.seqs.splice(i, 0, seq);
    this.at.splice(i, 0, at);
    this.events.splice(i, 0, events);
    if (this.seqs.length - this.head > maxOutstanding) this.head++;
  }

  /** Forget what the store now holds; answers its events. */
  stored(upTo: number): number {
    let n = 0;
    while (this.head < this.seqs.length && this.seqs[this.head]! <= upTo) n += this.events[this.head++]!;
    if (this.head > 1024 && this.head * 2 > this.seqs.length) {
      this.seqs = this.seqs.slice(this.head);
      this.at = this.at.slice(this.head);
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
    return n;
  }

  oldest(): number | undefined {
    return this.head < this.seqs.length ? this.at[this.head] : undefined;
  }
}

interface TenantShare {
  /** Events admitted, and requests shed, since the last tick. */
  admitted: number;
  shed: number;
  /** Events per second asked (admitted or not), averaged over about two seconds. */
  demand: number;
  /** Events per request, averaged: what a shed request would have brought. */
  perRequest: number;
  /** Events this tenant may still send now, while shedding (its share accrues every tick). */
  tokens: number;
}

export type Admission = Result<null, { retryAfterSeconds: number }>;

export class LoadShedder {
  private readonly shards: Outstanding[];
  private readonly tenants = new Map<string, TenantShare>();
  private lastWord = 0;
  private reconnectedAt = -Infinity;
  private busDown = false;
  private drainedSinceTick = 0;
  /** Events per second the pipeline stores for this process, averaged over a few seconds. */
  private drainRate = 0;
  private lagMs = 0;
  /** Whether admission is limited: the lag is past the target, and a flush role speaks. */
  private shedding = false;
  private readonly timer: NodeJS.Timeout;
  private readonly unsubscribe: () => void;

  constructor(
    bus: Pick<Bus, 'nc' | 'names' | 'on'>,
    shards: number,
    private readonly options: ShedOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.shards = Array.from({ length: shards }, () => new Outstanding());
    const sub = bus.nc.subscribe(bus.names.flushedSubject, {
      callback: (err, msg) => {
        if (err) return;
        const flushed = decodeFlushed(msg.data);
        if (!flushed) return;
        this.lastWord = this.now();
        for (const [shard, upTo] of flushed) this.drainedSinceTick += this.shards[shard]?.stored(upTo) ?? 0;
      },
    });
    const offDisconnect = bus.on('disconnect', () => {
      this.busDown = true;
      this.shedding = false;
    });
    const offReconnect = bus.on('reconnect', () => {
      this.busDown = false;
      this.reconnectedAt = this.now();
    });
    this.unsubscribe = () => {
      sub.unsubscribe();
      offDisconnect();
      offReconnect();
    };
    this.timer = setInterval(() => this.tick(), tickMs);
    this.timer.unref();
  }

  /** A message of `events` events this process published is in the stream at `seq`. */
  published(shard: number, seq: number, events: number): void {
    this.shards[shard]?.add(seq, this.now(), events);
  }

  /** Whether a request of `tenant` may go on; asked before its body is parsed. */
  admit(tenant: string): Admission {
    // A tenant first seen while shedding goes through once: the next tick gives it its share.
    const share = this.shedding ? this.tenants.get(tenant) : undefined;
    if (share === undefined || share.tokens > 0) return ok(null);
    share.shed++;
    shedCounter.inc();
    return fail({ retryAfterSeconds: this.retryAfter() });
  }

  /** The events of an admitted request, counted once its body is read. */
  charge(tenant: string, events: number): void {
    // The request that let a new tenant in is its own: its share starts at the next tick.
    const known = this.tenants.has(tenant);
    const share = this.share(tenant);
    share.admitted += events;
    share.perRequest = share.perRequest === 0 ? events : 0.9 * share.perRequest + 0.1 * events;
    if (this.shedding && known) share.tokens -= events;
  }

  /** The lag as last measured, in milliseconds. */
  get lag(): number {
    return this.lagMs;
  }

  private share(tenant: string): TenantShare {
    let s = this.tenants.get(tenant);
    if (!s) {
      s = { admitted: 0, shed: 0, demand: 0, perRequest: 0, tokens: 0 };
      this.tenants.set(tenant, s);
    }
    return s;
  }

  private retryAfter(): number {
    return Math.max(1, Math.min(30, Math.ceil((this.lagMs - this.options.targetLagMs) / 1000)));
  }

  /** Work out the lag, the drain rate, and (while shedding) each tenant's share of what the pipeline drains. */
  tick(): void {
    const now = this.now();
    let oldest = Infinity;
    for (const s of this.shards) oldest = Math.min(oldest, s.oldest() ?? Infinity);
    this.lagMs = oldest === Infinity ? 0 : now - oldest;
    lagGauge.set(this.lagMs / 1000);
    this.drainRate = 0.8 * this.drainRate + (0.2 * (this.drainedSinceTick * 1000)) / tickMs;
    this.drainedSinceTick = 0;
    const { targetLagMs, maxLagMs } = this.options;
    const listening = !this.busDown && now - this.lastWord < silentMs && now - this.reconnectedAt >= afterReconnectMs;
    this.shedding = targetLagMs > 0 && listening && this.lagMs > targetLagMs;
    if (!this.shedding) {
      this.tenants.clear();
      return;
    }
    // At the target the pipeline's own rate keeps the lag where it is; past it, less, so that the lag comes down.
    const factor = Math.max(0, 1 - (this.lagMs - targetLagMs) / (maxLagMs - targetLagMs));
    this.allocate(this.drainRate * factor);
  }

  /** Max-min fair shares of `limit` events per second between the tenants asking, by what each asks. */
  private allocate(limit: number): void {
    const asking = [...this.tenants.values()];
    for (const s of asking) {
      s.demand = 0.8 * s.demand + (0.2 * (s.admitted + s.shed * s.perRequest) * 1000) / tickMs;
      s.admitted = 0;
      s.shed = 0;
    }
    asking.sort((a, b) => a.demand - b.demand);
    let left = limit;
    asking.forEach((s, i) => {
      const fair = left / (asking.length - i);
      left -= Math.min(s.demand, fair);
      // Headroom over an average for a tenant within its share, whose requests come unevenly.
      const allowance = Math.min(1.5 * s.demand, fair);
      // A second's worth (and at least one request's) carried over: bursts pass, a sustained excess does not.
      s.tokens = Math.min(s.tokens + (allowance * tickMs) / 1000, Math.max(allowance, s.perRequest));
    });
  }

  stop(): void {
    clearInterval(this.timer);
    this.unsubscribe();
  }
}
