import type { Bus } from './bus.js';
import { decodeMessage, inputsToRead, type OutputMessage, type WireMessage } from './wire.js';

/** What a version 4 output message names and the event stream no longer holds (past its retention): no events. */
const gone: WireMessage = { v: 1, events: [] };

/**
 * The event stream's messages that these output messages pass on by sequence (version 4), read `concurrency` at a
 * time, as they are stored. One the stream no longer holds is left out and reported to `missing`: the flusher is then
 * more than the stream's retention behind, and those events cannot be stored any more.
 */
export async function readInputBytes(
  bus: Bus,
  outputs: readonly OutputMessage[],
  missing: (seq: number) => void,
  concurrency = 8,
): Promise<ReadonlyMap<number, Uint8Array>> {
  const seqs = [...new Set(outputs.flatMap(inputsToRead))];
  const read = new Map<number, Uint8Array>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < seqs.length) {
      const seq = seqs[next++]!;
      const data = await bus.readMessage(bus.names.eventsStream, seq);
      if (data) read.set(seq, data);
      else missing(seq);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, seqs.length) }, worker));
  return read;
}

/** The same messages decoded, for `forEachPassed`: one the stream no longer holds reads as no events. */
export async function readInputs(
  bus: Bus,
  outputs: readonly OutputMessage[],
  missing: (seq: number) => void,
): Promise<(seq: number) => WireMessage> {
  const read = new Map([...(await readInputBytes(bus, outputs, missing))].map(([seq, d]) => [seq, decodeMessage(d)]));
  return (seq) => read.get(seq) ?? gone;
}
