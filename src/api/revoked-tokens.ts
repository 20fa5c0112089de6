import type { KV } from 'nats';
import type { Bus } from '../bus/bus.js';
import { encodeRecord } from '../control/kv-records.js';
import { WatchedMap } from '../control/watched-map.js';
import type { Logger } from '../log.js';
import { userTokenSeconds } from './tokens.js';

/**
 * User tokens signed out one at a time (`POST /v1/auth/logout`), by token id, shared by every api process through a
 * watched KV bucket. An entry outlives the longest user token, then expires with the bucket's TTL.
 */
export class RevokedTokens {
  private constructor(
    private readonly kv: KV,
    private readonly map: WatchedMap<unknown>,
  ) {}

  static async open(bus: Bus, log: Logger): Promise<RevokedTokens> {
    const kv = await bus.kv(bus.names.revokedTokensBucket, (userTokenSeconds + 300) * 1000);
    return new RevokedTokens(kv, await WatchedMap.open<unknown>(kv, bus, log));
  }

  has(jti: string): boolean {
    return this.map.get(jti) !== undefined;
  }

  async revoke(jti: string, exp: number): Promise<void> {
    await this.kv.put(jti, encodeRecord({ exp }));
  }

  stop(): void {
    this.map.stop();
  }
}
