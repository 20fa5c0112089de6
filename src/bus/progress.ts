import { Packr } from 'msgpackr';
import type { JsMsg } from 'nats';
import { inputSeqHeader } from './wire.js';

// How far the pipeline has come, told by the flush role to whoever listens (ingest sheds load by it: docs/ingest.md,
// "Overload"). Core NATS, not stored: a lost message is made up for by the next write's. MessagePack of
// [[shard, up_to], ...]: after a write, the last input of each shard whose events and rows are in the store.

const packr = new Packr({ useRecords: false, moreTypes: false });

export type FlushedInputs = Array<[shard: number, upTo: number]>;

export function encodeFlushed(flushed: FlushedInputs): Uint8Array {
  return packr.pack(flushed);
}

/** Null for anything that is not a list of two-number pairs (it comes over the network). */
export function decodeFlushed(data: Uint8Array): FlushedInputs | null {
  try {
    const v: unknown = packr.unpack(data);
    if (!Array.isArray(v)) return null;
    const ok = v.every((p) => Array.isArray(p) && p.length === 2 && Number.isInteger(p[0]) && Number.isInteger(p[1]));
    return ok ? (v as FlushedInputs) : null;
  } catch {
    return null;
  }
}

/**
 * The last input of each shard that raw-stream messages (aggregator output) cover: the shard is the last token of a
 * message's subject (`<prefix>.raw.<shard>`), the input its header's.
 */
export function flushedInputs(messages: readonly JsMsg[]): FlushedInputs {
  const upTo = new Map<number, number>();
  for (const m of messages) {
    const shard = Number(m.subject.slice(m.subject.lastIndexOf('.') + 1));
    const seq = Number(m.headers?.get(inputSeqHeader));
    if (Number.isInteger(shard) && seq > (upTo.get(shard) ?? 0)) upTo.set(shard, seq);
  }
  return [...upTo];
}
