// Events that come long after their session: a phone that recorded a stall offline and sends it on reconnecting. By
// then the aggregator has let the session go (the soak's layout keeps idle sessions 10 minutes), so each late stall
// makes it recall the session's stored events (docs/aggregation.md), under the soak's faults like everything else.

import type { OracleEvent } from '../simulator/oracle.js';
import type { Rng } from '../simulator/rng.js';

/** A stall this long, this far after the heartbeat it follows: inside the 10 s before the next one. */
const stallAfterMs = 2000;
const stallMs = 2000;

/** What a session's player is doing after each of these events (as bench/simulator/fleet.ts plays it). */
const stateAfter: Readonly<Record<string, 'playing' | 'stalled' | 'paused' | 'over'>> = {
  first_frame: 'playing',
  resume: 'playing',
  rebuffer_end: 'playing',
  rebuffer_start: 'stalled',
  pause: 'paused',
  ended: 'over',
  session_end: 'over',
};

/**
 * A late stall for up to `sessions` sessions of `events`, chosen by `rng`: a rebuffer_start and rebuffer_end between
 * two heartbeats of the session with nothing else between them, while it played. Each pair carries the session's
 * fields (viewer, content, context) and fresh event ids.
 */
export function lateStalls(events: readonly OracleEvent[], rng: Rng, sessions: number): OracleEvent[][] {
  const bySession = new Map<string, OracleEvent[]>();
  for (const e of events) {
    if (e.session_id === undefined) continue;
    const list = bySession.get(e.session_id);
    if (list) list.push(e);
    else bySession.set(e.session_id, [e]);
  }
  const gaps: Array<[OracleEvent, OracleEvent]> = [];
  for (const list of bySession.values()) {
    list.sort((a, b) => a.ts - b.ts);
    const quiet: Array<[OracleEvent, OracleEvent]> = [];
    let state: string = 'starting';
    for (let i = 0; i + 1 < list.length; i++) {
      const [a, b] = [list[i]!, list[i + 1]!];
      // An error ends a session when fatal, and leaves the state as it was otherwise.
      state = a.event_type === 'error' && a.properties?.fatal === true ? 'over' : (stateAfter[a.event_type] ?? state);
      if (state !== 'playing' || a.event_type !== 'heartbeat' || b.event_type !== 'heartbeat') continue;
      if (b.ts - a.ts > stallAfterMs + stallMs) quiet.push([a, b]);
    }
    if (quiet.length > 0) gaps.push(rng.pick(quiet));
  }
  return rng
    .shuffle(gaps)
    .slice(0, sessions)
    .map(([beat]) => {
      const { event_id: _id, event_type: _type, ts, position_sec, properties: _p, ...session } = beat;
      const at = (type: string, ms: number): OracleEvent => ({
        ...session,
        ...(session.context ? { context: { ...session.context } } : {}),
        event_type: type,
        event_id: rng.uuid(),
        ts: ts + ms,
        position_sec: (position_sec ?? 0) + stallAfterMs / 1000,
      });
      return [at('rebuffer_start', stallAfterMs), at('rebuffer_end', stallAfterMs + stallMs)];
    });
}
