import { Packr } from 'msgpackr';
import type { ObjectStore } from 'nats';
import type { Logger } from '../log.js';

// State checkpoints in the NATS object store (aggregator shards, the alerts role): one MessagePack object per owner,
// read back only when `accept` says it is of this version and owner; otherwise the owner rebuilds from its stream.

const codec = new Packr({ useRecords: false });

/**
 * How long a checkpoint read or write may take. nats.js puts no deadline on object store reads and writes: while a
 * cluster moves leaders one was seen waiting for minutes, holding a shard's rebuild with it.
 */
const checkpointTimeoutMs = 10_000;

function deadline<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} took more than ${checkpointTimeoutMs} ms`)),
      checkpointTimeoutMs,
    );
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

export const packCheckpoint = (value: unknown): Buffer => codec.pack(value);

export async function readCheckpoint<T>(
  store: ObjectStore,
  name: string,
  accept: (cp: T) => boolean,
  log: Logger,
): Promise<T | null> {
  try {
    const blob = await deadline(store.getBlob(name), 'reading the checkpoint');
    if (!blob) return null;
    const cp = codec.unpack(blob) as T;
    if (accept(cp)) return cp;
    log.warn(
      { checkpoint: name, v: (cp as { v?: unknown }).v },
      'checkpoint of another version or owner (docs/compatibility.md); rebuilding from the stream',
    );
    return null;
  } catch (err) {
    log.warn({ err: (err as Error).message, checkpoint: name }, 'checkpoint unreadable; rebuilding from the stream');
    return null;
  }
}

/** Write a packed checkpoint; a failure is logged and answered false (the next checkpoint will be written). */
export async function writeCheckpoint(
  store: ObjectStore,
  name: string,
  blob: Uint8Array,
  log: Logger,
): Promise<boolean> {
  try {
    // A write that completes after its deadline may replace a newer checkpoint with this older one: still a state
    // of output that exists, so a rebuild from it is as exact, only longer.
    await deadline(store.putBlob({ name }, blob), 'writing the checkpoint');
    return true;
  } catch (err) {
    log.warn({ err: (err as Error).message, checkpoint: name }, 'checkpoint not written; the next one will be');
    return false;
  }
}
