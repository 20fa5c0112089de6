import { eventLimits } from './taxonomy.js';

export interface Stamp {
  ts: number;
  client_ts: number | null;
}

/**
 * CONTRACT §4 "Timestamps". `server_ts` → receive time. With `sent_at`, a batch whose clock is off by more than
 * 30 s is shifted as a whole (offline buffers keep their order and spacing). Without it, each event more than 30 s
 * from the receive time gets the receive time. Events without `ts` get the receive time.
 */
export function stampTimes(
  clientTs: ReadonlyArray<string | undefined>,
  receivedAt: number,
  serverTs: boolean,
  sentAt: number | null,
): Stamp[] {
  const tolerance = eventLimits.skewToleranceMs;
  const skew = sentAt === null ? 0 : receivedAt - sentAt;
  const shift = sentAt !== null && Math.abs(skew) > tolerance;
  return clientTs.map((raw) => {
    const original = raw === undefined ? null : Date.parse(raw);
    if (original === null || Number.isNaN(original) || serverTs)
      return { ts: receivedAt, client_ts: original !== null && !Number.isNaN(original) ? original : null };
    if (sentAt !== null) return { ts: shift ? original + skew : original, client_ts: original };
    return { ts: Math.abs(original - receivedAt) > tolerance ? receivedAt : original, client_ts: original };
  });
}
