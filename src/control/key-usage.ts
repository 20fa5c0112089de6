import type { KV } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { Logger } from '../log.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How stale `last_used_at` may be: a busy key is written at most this often, not once per request. */
export const lastUsedPrecisionMs = 60_000;

/**
 * `last_used_at` of API keys: ingest notes each use in memory and writes a key's time to the `<prefix>_key_usage`
 * bucket at most once a minute (the first use at the next sync), so the hot path never waits on NATS.
 */
export class KeyUsage {
  private readonly touched = new Map<string, number>();
  private readonly written = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly kv: KV,
    private readonly log: Logger,
  ) {}

  static async open(bus: Bus, syncMs: number, log: Logger): Promise<KeyUsage> {
    const u = new KeyUsage(await bus.kv(bus.names.keyUsageBucket), log.child({ module: 'key-usage' }));
    u.timer = setInterval(() => {
      u.syncing = u.syncing.then(() => u.sync());
    }, syncMs);
    u.timer.unref();
    return u;
  }

  touch(keyId: string, now: number): void {
    this.touched.set(keyId, now);
  }

  private async sync(): Promise<void> {
    for (const [id, at] of this.touched) {
      if (at - (this.written.get(id) ?? -Infinity) < lastUsedPrecisionMs) continue;
      try {
        await this.kv.put(id, encoder.encode(new Date(at).toISOString()));
        this.written.set(id, at);
        this.touched.delete(id);
      } catch (err) {
        this.log.debug({ err: (err as Error).message }, 'last_used_at write deferred');
        return;
      }
    }
    // Keys written recently stay noted until the minute passes; the rest are done.
    for (const [id, at] of this.touched) if (at <= (this.written.get(id) ?? -Infinity)) this.touched.delete(id);
  }

  /** Last use of every key that has one, by key id. */
  static async read(bus: Bus): Promise<Map<string, string>> {
    const kv = await bus.kv(bus.names.keyUsageBucket);
    const out = new Map<string, string>();
    for await (const k of await kv.keys()) {
      const e = await kv.get(k);
      if (e && e.operation === 'PUT') out.set(k, decoder.decode(e.value));
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.syncing;
    this.written.clear();
    await this.sync().catch(() => undefined);
  }
}
