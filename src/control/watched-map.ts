import type { KV, KvEntry } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { Logger } from '../log.js';
import { decodeRecord } from './kv-records.js';

/**
 * A bucket mirrored in memory through a KV watch: every change made anywhere reaches every process in
 * milliseconds (revocation within 1 s). If the watch ends (NATS restarted), it is opened again and the map rebuilt
 * from the bucket's current values.
 */
export class WatchedMap<T> {
  private map = new Map<string, T>();
  private stopped = false;
  private offReconnect: (() => void) | undefined;
  private current: { stop(): void } | undefined;

  private constructor(
    private readonly kv: KV,
    private readonly log: Logger,
    private readonly index: (key: string, value: T) => string,
  ) {}

  /**
   * `index` gives the key to look records up by (e.g. a key hash instead of the bucket key). A reconnect of `bus`
   * restarts the watch: a restarted server has lost its consumer, which may stall rather than end.
   */
  static async open<T>(
    kv: KV,
    bus: Pick<Bus, 'on'>,
    log: Logger,
    index: (key: string, value: T) => string = (k) => k,
  ): Promise<WatchedMap<T>> {
    const m = new WatchedMap<T>(kv, log, index);
    await m.watch();
    m.offReconnect = bus.on('reconnect', () => m.restart());
    return m;
  }

  get(key: string): T | undefined {
    return this.map.get(key);
  }

  values(): T[] {
    return [...this.map.values()];
  }

  entries(): Array<[string, T]> {
    return [...this.map.entries()];
  }

  get size(): number {
    return this.map.size;
  }

  private async watch(): Promise<void> {
    const next = new Map<string, T>();
    let live = false;
    let ready!: () => void;
    const initialised = new Promise<void>((r) => (ready = r));
    const byBucketKey = new Map<string, string>();
    const apply = (e: KvEntry, into: Map<string, T>): void => {
      const old = byBucketKey.get(e.key);
      if (old !== undefined) into.delete(old);
      if (e.operation === 'PUT') {
        try {
          const value = decodeRecord<T>(e.value);
          const idx = this.index(e.key, value);
          byBucketKey.set(e.key, idx);
          into.set(idx, value);
        } catch (err) {
          this.log.error({ err, key: e.key }, 'unreadable control-plane record ignored');
        }
      } else {
        byBucketKey.delete(e.key);
      }
    };
    const iter = await this.kv.watch({
      key: '>',
      initializedFn: () => {
        live = true;
        this.map = next;
        ready();
      },
    });
    this.current = iter;
    void (async () => {
      try {
        for await (const e of iter) apply(e, live ? this.map : next);
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'KV watch ended');
      }
      if (!live) ready();
      if (!this.stopped) this.rewatch();
    })();
    await initialised;
  }

  private rewatch(): void {
    setTimeout(() => {
      if (this.stopped) return;
      this.watch().catch((err: Error) => {
        this.log.warn({ err: err.message }, 'KV watch could not reopen; retrying');
        this.rewatch();
      });
    }, 500);
  }

  /** Reopen the watch and rebuild the map; the current map serves until the new one is whole. */
  private restart(): void {
    this.current?.stop();
  }

  stop(): void {
    this.stopped = true;
    this.offReconnect?.();
    this.current?.stop();
  }
}
