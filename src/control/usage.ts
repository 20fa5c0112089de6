import type { KV, KvEntry } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { Logger } from '../log.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Counter {
  /** Last value seen in the bucket (through the watch or our own write) and its revision. */
  shared: number;
  revision: number;
  /** Counted here, not yet written to the bucket. */
  pending: number;
  /** Counted here and being written now: still ours until the write lands in `shared`. */
  writing: number;
}

export const minuteOf = (ms: number): number => Math.floor(ms / 60_000);

// Every request asks for its month; months start on a minute boundary, so one answer holds for a whole minute.
let monthMinute = NaN;
let monthText = '';
export const monthOf = (ms: number): string => {
  const minute = minuteOf(ms);
  if (minute !== monthMinute) {
    monthText = new Date(ms).toISOString().slice(0, 7);
    monthMinute = minute;
  }
  return monthText;
};

/**
 * Per-tenant counts shared by every ingest process through two KV buckets: accepted events this UTC month
 * (kept) and this UTC minute (expiring). Each process adds its own counts every `syncMs` with compare-and-set and
 * watches the others'. A process therefore sees the others' counts at most about `syncMs` + one round trip late:
 * the bound on overshoot is documented in docs/limits.md.
 */
export class UsageCounters {
  private readonly counters = new Map<string, Counter>();
  private timer: NodeJS.Timeout | undefined;
  private readonly watches: Array<{ stop(): void }> = [];
  private syncing: Promise<void> = Promise.resolve();
  private offReconnect: (() => void) | undefined;
  private closed = false;

  private constructor(
    private readonly month: KV | null,
    private readonly minute: KV,
    private readonly log: Logger,
  ) {}

  /**
   * `buckets`: where the counts live. Ingest counts events per tenant in both; the api counts requests per token per
   * minute only (`month: null`).
   */
  static async open(
    bus: Bus,
    syncMs: number,
    log: Logger,
    buckets: { month: string | null; minute: string } = { month: bus.names.usageBucket, minute: bus.names.rateBucket },
  ): Promise<UsageCounters> {
    const [month, minute] = await Promise.all([
      buckets.month === null ? null : bus.kv(buckets.month),
      bus.kv(buckets.minute, 180_000),
    ]);
    const u = new UsageCounters(month, minute, log.child({ module: 'usage' }));
    await Promise.all([month ? u.watch(month, 'm') : undefined, u.watch(minute, 'r')]);
    // A restarted server has lost the watches' consumers: end them, and they reopen (below) on the new server.
    u.offReconnect = bus.on('reconnect', () => {
      for (const w of u.watches.splice(0)) w.stop();
    });
    u.timer = setInterval(() => void u.sync(), syncMs);
    u.timer.unref();
    return u;
  }

  private async watch(kv: KV, kind: 'm' | 'r'): Promise<void> {
    let ready!: () => void;
    const initialised = new Promise<void>((r) => (ready = r));
    const open = async (): Promise<void> => {
      const iter = await kv.watch({ key: '>', initializedFn: ready });
      this.watches.push(iter);
      void (async () => {
        try {
          for await (const e of iter) this.seen(`${kind}:${e.key}`, e);
        } catch {
          // Ended by a NATS restart: reopened below.
        }
        ready();
        reopen();
      })();
    };
    // Every 500 ms until the bucket answers again (a server just restarted may not serve JetStream yet).
    const reopen = (): void => {
      setTimeout(() => {
        if (!this.closed) open().catch(reopen);
      }, 500).unref();
    };
    await open();
    await initialised;
  }

  private seen(id: string, e: KvEntry): void {
    const c = this.counter(id);
    if (e.revision <= c.revision) return;
    c.revision = e.revision;
    c.shared = e.operation === 'PUT' ? Number(decoder.decode(e.value)) || 0 : 0;
  }

  private counter(id: string): Counter {
    let c = this.counters.get(id);
    if (!c) {
      c = { shared: 0, revision: 0, pending: 0, writing: 0 };
      this.counters.set(id, c);
    }
    return c;
  }

  private value(id: string): number {
    const c = this.counters.get(id);
    return c ? c.shared + c.writing + c.pending : 0;
  }

  monthUsed(tenant: string, now = Date.now()): number {
    return this.value(`m:${tenant}.${monthOf(now)}`);
  }

  minuteUsed(tenant: string, now = Date.now()): number {
    return this.value(`r:${tenant}.${minuteOf(now)}`);
  }

  add(tenant: string, events: number, now = Date.now()): void {
    if (events <= 0) return;
    if (this.month) this.counter(`m:${tenant}.${monthOf(now)}`).pending += events;
    this.counter(`r:${tenant}.${minuteOf(now)}`).pending += events;
  }

  /** Take back a count added for events that were then not accepted. */
  remove(tenant: string, events: number, now = Date.now()): void {
    if (events <= 0) return;
    if (this.month) this.counter(`m:${tenant}.${monthOf(now)}`).pending -= events;
    this.counter(`r:${tenant}.${minuteOf(now)}`).pending -= events;
  }

  /** Write what is counted here to the buckets, one sync at a time (the timer calls this every `syncMs`). */
  sync(): Promise<void> {
    this.syncing = this.syncing.then(() => this.writePending());
    return this.syncing;
  }

  private async writePending(): Promise<void> {
    const currentMinute = minuteOf(Date.now());
    for (const [id, c] of this.counters) {
      const [kind, key] = [id.slice(0, 1), id.slice(2)];
      if (kind === 'r' && Number(key.slice(key.lastIndexOf('.') + 1)) < currentMinute - 2) {
        if (c.pending === 0) this.counters.delete(id);
        else c.pending = 0; // a past minute's rate count no longer limits anything
        continue;
      }
      if (c.pending === 0) continue;
      const kv = kind === 'm' ? this.month : this.minute;
      if (kv !== null) await this.write(kv, key, c);
    }
  }

  /**
   * Moves `pending` into `writing` for the write and into `shared` in the same step as the write lands, so a count
   * read meanwhile never misses it. The watch may deliver our own write just before its acknowledgement: until then
   * the count is high by `writing`, which errs on the side of limiting.
   */
  private async write(kv: KV, key: string, c: Counter): Promise<void> {
    c.writing = c.pending;
    c.pending = 0;
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        const next = c.shared + c.writing;
        const revision =
          c.revision === 0
            ? await kv.create(key, encoder.encode(String(next)))
            : await kv.update(key, encoder.encode(String(next)), c.revision);
        if (revision > c.revision) {
          c.revision = revision;
          c.shared = next;
        }
        c.writing = 0;
        return;
      } catch {
        // Another process wrote first (or the bus is down): read the bucket's value and try again.
        try {
          const e = await kv.get(key);
          c.revision = e ? e.revision : 0;
          c.shared = e && e.operation === 'PUT' ? Number(decoder.decode(e.value)) || 0 : 0;
        } catch (err) {
          this.log.debug({ err: (err as Error).message, key }, 'usage sync deferred');
          break;
        }
      }
    }
    c.pending += c.writing;
    c.writing = 0;
  }

  /** Write what is pending and stop. */
  async close(): Promise<void> {
    this.closed = true;
    this.offReconnect?.();
    if (this.timer) clearInterval(this.timer);
    await this.sync().catch(() => undefined);
    for (const w of this.watches) w.stop();
  }
}
