import type { KV } from 'nats';

/**
 * Which raw-stream messages the flusher wrote together. Several messages go into one insert per table, under one
 * de-duplication token per table; a message sent again (its flusher killed, or its insert failed) must be written again
 * in the same group under the same tokens, or the rows already stored would be stored twice. So a group is recorded in
 * NATS before anything of it is written, and a message is written with the group its record names.
 *
 * A group never crosses a multiple of `groupSpan`: a span's groups are one KV entry, found from any member's sequence
 * and changed only by compare-and-set, so two flushers never record one message in two groups.
 */
export const groupSpan = 100;

export const spanOf = (seq: number): number => Math.floor(seq / groupSpan);

/** A group's de-duplication token for one table (`raw` for events): a group is named by its first sequence. */
export function groupToken(table: string, streamId: string, group: readonly number[]): string {
  return `${table}:${streamId}:g${group[0]}`;
}

/** Whose group records a `FlushGroups` keeps: a flush tier's, of one raw stream (its identity, `streamIdentity`). */
export const groupScope = (tier: string, streamId: string): string => `${tier}.${streamId}`;

export interface Claim {
  /** Groups recorded by this call, sorted, none of whose rows can be in the store yet. */
  created: number[][];
  /** Groups recorded earlier that hold some of the messages: written again whole. */
  recorded: number[][];
}

interface SpanRecord {
  /** 0: no entry yet. */
  revision: number;
  groups: number[][];
}

/** Spans whose records this process keeps in memory (a write past the last one reads the entry again). */
const cachedSpans = 64;

export class FlushGroups {
  private readonly cache = new Map<string, SpanRecord>();

  constructor(
    private readonly kv: KV,
    /**
     * The tier and the raw stream's identity (`groupScope`): each tier groups the messages its own way, and a stream
     * made again restarts its sequences.
     */
    private readonly scope: string,
  ) {}

  /**
   * Record the messages of one span not yet in a group: `together` as one group, each of `alone` as a group of its own.
   * Messages already in a recorded group are answered with that group instead.
   */
  async claim(together: readonly number[], alone: readonly number[]): Promise<Claim> {
    // A message in both lists, or twice in one (sent again while its first delivery was still held: its ack wait
    // passed without a heartbeat reaching NATS), is recorded once, with `together`. Recorded twice, its two groups
    // shared a first sequence and so their tokens: the store kept one insert and dropped the other's rows (a soak).
    together = [...new Set(together)];
    alone = [...new Set(alone)].filter((s) => !together.includes(s));
    const all = [...together, ...alone];
    const span = spanOf(all[0]!);
    if (all.some((s) => spanOf(s) !== span)) throw new Error(`flush group across spans: ${all.join(',')}`);
    const key = `${this.scope}.${span}`;
    for (;;) {
      const current = this.cache.get(key) ?? (await this.read(key));
      const groupOf = new Map(current.groups.flatMap((g) => g.map((s) => [s, g] as const)));
      const recorded = [...new Set(all.map((s) => groupOf.get(s)).filter((g) => g !== undefined))];
      const fresh = together.filter((s) => !groupOf.has(s)).sort((a, b) => a - b);
      const created = [...(fresh.length > 0 ? [fresh] : []), ...alone.filter((s) => !groupOf.has(s)).map((s) => [s])];
      if (created.length === 0) return { created, recorded };
      const groups = [...current.groups, ...created];
      const value = JSON.stringify(groups);
      try {
        const revision =
          current.revision === 0
            ? await this.kv.create(key, value)
            : await this.kv.update(key, value, current.revision);
        this.remember(key, { revision, groups });
        return { created, recorded };
      } catch (err) {
        // Another flusher changed the span meanwhile: read it again and leave out what it recorded.
        if (!/wrong last sequence|key exists/i.test((err as Error).message)) throw err;
        this.cache.delete(key);
      }
    }
  }

  private async read(key: string): Promise<SpanRecord> {
    const entry = await this.kv.get(key);
    if (!entry || entry.operation !== 'PUT') return { revision: 0, groups: [] };
    return { revision: entry.revision, groups: JSON.parse(entry.string()) as number[][] };
  }

  private remember(key: string, record: SpanRecord): void {
    this.cache.delete(key);
    this.cache.set(key, record);
    if (this.cache.size > cachedSpans) this.cache.delete(this.cache.keys().next().value!);
  }
}
