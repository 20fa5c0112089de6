import { Packr } from 'msgpackr';
import type { ObjectStore } from 'nats';
import type { Logger } from '../log.js';

// State checkpoints in the NATS object store (aggregator shards, the alerts role): one MessagePack object per owner,
// read back only when `accept` says it is of this version and owner; otherwise the owner rebuilds from its stream.

const codec = new Packr({ useRecords: false });

export const packCheckpoint = (value: unknown): Buffer => codec.pack(value);

export async function readCheckpoint<T>(store: ObjectStore, name: string, accept: (cp: T) => boolean, log: Logger): Promise<T | null> {
  try {
    const blob = await store.getBlob(name);
    if (!blob) return null;
    const cp = codec.unpack(blob) as T;
    return accept(cp) ? cp : null;
  } catch (err) {
    log.warn({ err: (err as Error).message, checkpoint: name }, 'checkpoint unreadable; rebuilding from the stream');
    return null;
  }
}

/** Write a packed checkpoint; a failure is logged and answered false (the next checkpoint will be written). */
export async function writeCheckpoint(store: ObjectStore, name: string, blob: Uint8Array, log: Logger): Promise<boolean> {
  try {
    await store.putBlob({ name }, blob);
    return true;
  } catch (err) {
    log.warn({ err: (err as Error).message, checkpoint: name }, 'checkpoint not written; the next one will be');
    return false;
  }
}
