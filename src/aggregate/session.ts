// A session's event timeline and its state machine (docs/metrics.md "Sessions").
//
// Each event is one number: ts × 128 + rank × 8 + state-after. Sorting these numbers sorts by (ts, rank), the
// documented order, which never depends on arrival: a late event is inserted where it would have been on time.
// Packing keeps a session at 8 bytes per event in a plain array (V8 stores it unboxed).

import { segmentValues } from '../metric/pipeline.js';

export const State = { none: 0, starting: 1, playing: 2, rebuffering: 3, paused: 4, closed: 5 } as const;
export type State = (typeof State)[keyof typeof State];

export function isActive(state: number): boolean {
  return state >= State.starting && state <= State.rebuffering;
}

/** Watch time accrues after events that leave the session playing or rebuffering. */
export function isWatching(state: number): boolean {
  return state === State.playing || state === State.rebuffering;
}

/**
 * Tie order for equal timestamps (docs/metrics.md): a fatal error has its own rank. A stall ranks before every event
 * that puts the session back in `playing`, so a stall and its end in one millisecond last 0 ms: a player that reports
 * states (CMCD) sends the end of a seek's wait as `playing`, a first_frame.
 */
export const rank = {
  play_start: 0,
  rebuffer_start: 1,
  first_frame: 2,
  resume: 3,
  seek_start: 4,
  seek_end: 5,
  rebuffer_end: 6,
  heartbeat: 7,
  bitrate_change: 8,
  error: 9,
  pause: 10,
  fatal_error: 11,
  ended: 12,
  session_end: 13,
} as const;

const sessionTypes = new Set<string>(Object.keys(rank).filter((k) => k !== 'fatal_error'));

/** The rank of a session event, or -1 for an event that is not one (custom, billing, catalogue). */
export function rankOf(eventType: string, fatal: boolean): number {
  if (!sessionTypes.has(eventType)) return -1;
  if (eventType === 'error' && fatal) return rank.fatal_error;
  return rank[eventType as keyof typeof rank];
}

/** Ranks whose state is the state before them: a late event ahead of them can change theirs. */
function keepsState(r: number): boolean {
  return r === rank.seek_start || r === rank.bitrate_change || r === rank.error || r === rank.heartbeat;
}

export function nextState(before: number, r: number): number {
  switch (r) {
    case rank.play_start:
      return State.starting;
    case rank.first_frame:
    case rank.resume:
    case rank.seek_end:
    case rank.rebuffer_end:
      return State.playing;
    case rank.heartbeat:
      return before === State.rebuffering ? State.rebuffering : State.playing;
    case rank.rebuffer_start:
      return State.rebuffering;
    case rank.pause:
      return State.paused;
    case rank.fatal_error:
    case rank.ended:
    case rank.session_end:
      return State.closed;
    default:
      return before;
  }
}

export const pack = (ts: number, r: number, state: number): number => ts * 128 + r * 8 + state;
export const tsOf = (v: number): number => Math.floor(v / 128);
export const rankOfPacked = (v: number): number => Math.floor(v / 8) % 16;
export const stateOf = (v: number): number => v % 8;

/**
 * A session's events: `tl` packed as above; `vals`, once an event carried a segment value (`segmentValues`: bitrate,
 * CDN), one array per value beside `tl`, each null until an event carried that value; `names`, the strings of the
 * string values, which `vals` holds as indexes (a session's few CDNs). In `vals`, an entry is `v + 1` when the event
 * carried `v` itself, `-(v + 1)` when it inherited `v` from the event before it, and 0 before any event carried one:
 * a segment's value is its first event's, own or inherited.
 */
export interface Timeline {
  tl: number[];
  vals: (number[] | null)[] | null;
  names: string[] | null;
}

/** The segment values an event carries, in `segmentValues`' order (undefined: none). Filled by the caller. */
export type Carried = readonly (number | string | undefined)[];

/**
 * Told each segment that stops being true (-1), then each that becomes true (+1): from an event to the next (`to`
 * null after the last), in the state after the first, its values read with `segmentValue(t, c, j)`. Segments come
 * as numbers, not objects: every event changes two or three, and an object each was garbage made per event.
 */
export interface SegmentSink {
  onSegment(from: number, to: number | null, state: number, t: Timeline, j: number, sign: 1 | -1): void;
}

/** Per segment value, whether it is a string (kept in `names`). */
const isName = segmentValues.map((v) => v.kind === 'string');

/** The segment value number `c` of the segment starting at event `j`: a number, a string, or null when none is known. */
export function segmentValue(t: Timeline, c: number, j: number): number | string | null {
  const x = t.vals?.[c]?.[j] ?? 0;
  if (x === 0) return null;
  const v = Math.abs(x) - 1;
  return isName[c] ? t.names![v]! : v;
}

/** What an event's value is when it carries none: the one before it, as inherited. */
const inherit = (vals: readonly number[], j: number): number => (j === 0 ? 0 : -Math.abs(vals[j - 1]!));

function emit(t: Timeline, j: number, sign: 1 | -1, sink: SegmentSink): void {
  const tl = t.tl;
  const v = tl[j]!;
  sink.onSegment(tsOf(v), j + 1 < tl.length ? tsOf(tl[j + 1]!) : null, stateOf(v), t, j, sign);
}

/** -1, 0 or 1 as the event at `j`'s own value number `c` sorts before, with or after `value` (none sorts last). */
function compareOwn(t: Timeline, c: number, j: number, value: number | string | undefined): number {
  const x = t.vals?.[c]?.[j] ?? 0;
  if (x <= 0) return value === undefined ? 0 : 1;
  if (value === undefined) return -1;
  const own = typeof value === 'string' ? t.names![x - 1]! : x - 1;
  return own < value ? -1 : own > value ? 1 : 0;
}

/**
 * Where an event goes among those of its own (ts, rank), which share one packed number: ordered by the values they
 * carry themselves, value by value, each by value and none last. The values after the group are then those of its
 * last, whatever the arrival order; an event carrying none goes last, as before values existed.
 */
function placeInGroup(t: Timeline, lo: number, hi: number, carried: Carried): number {
  if (t.vals === null) return hi;
  let k = lo;
  for (; k < hi; k++) {
    let cmp = 0;
    for (let c = 0; c < carried.length && cmp === 0; c++) cmp = compareOwn(t, c, k, carried[c]);
    if (cmp > 0) break;
  }
  return k;
}

/** The number `vals` holds for a carried value: the value itself, or a string's index in `names` (added if new). */
function stored(t: Timeline, value: number | string): number {
  if (typeof value === 'number') return value;
  const names = (t.names ??= []);
  const i = names.indexOf(value);
  return i >= 0 ? i : names.push(value) - 1;
}

/**
 * Insert an event (carrying the values `carried`, of which any may be undefined) into a timeline, keep every state and
 * value right, and report exactly the segments that changed: the one before the insert (its end moves), the run of
 * state-keeping events after it, up to the next event that sets the state by itself, and, for each value the event
 * carries, the run after it that inherited the one before. Appending, the usual case, touches two segments.
 */
export function insertEvent(t: Timeline, ts: number, r: number, carried: Carried, sink: SegmentSink | null): number {
  const tl = t.tl;
  const base = ts * 128 + r * 8;
  const n = tl.length;
  let carries = false;
  for (let c = 0; c < carried.length; c++) {
    if (carried[c] === undefined) continue;
    carries = true;
    const vals = (t.vals ??= new Array<number[] | null>(carried.length).fill(null));
    vals[c] ??= new Array<number>(n).fill(0);
  }
  const vals = t.vals;
  if (n === 0 || tl[n - 1]! < base) {
    // After every event so far (the usual case): the last segment gets an end, and a new last one opens.
    if (n > 0 && sink) emit(t, n - 1, -1, sink);
    tl.push(base + nextState(n === 0 ? State.none : stateOf(tl[n - 1]!), r));
    if (vals)
      for (let c = 0; c < vals.length; c++) {
        const cv = vals[c];
        const value = carried[c];
        if (cv) cv.push(value === undefined ? inherit(cv, n) : stored(t, value) + 1);
      }
    if (sink) {
      if (n > 0) emit(t, n - 1, 1, sink);
      emit(t, n, 1, sink);
    }
    return n;
  }
  // The group of events with the same (ts, rank): [lo, hi).
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (tl[mid]! < base) lo = mid + 1;
    else hi = mid;
  }
  hi = lo;
  while (hi < n && tl[hi]! < base + 8) hi++;
  const k = placeInGroup(t, lo, hi, carried);
  // The changed run, in indices before the insert: state-keeping events after it, and those inheriting a value.
  let c = k;
  while (c < n && keepsState(rankOfPacked(tl[c]!))) c++;
  let end = c;
  if (vals && carries)
    for (let ch = 0; ch < vals.length; ch++) {
      const cv = vals[ch];
      if (!cv || carried[ch] === undefined) continue;
      let v = k;
      while (v < n && cv[v]! <= 0) v++;
      if (v > end) end = v;
    }
  const first = Math.max(k - 1, 0);
  if (sink) for (let j = first; j <= end - 1; j++) emit(t, j, -1, sink);
  tl.splice(k, 0, base);
  for (let j = k; j <= c && j < tl.length; j++) {
    const before = j === 0 ? State.none : stateOf(tl[j - 1]!);
    const v = tl[j]!;
    tl[j] = v - stateOf(v) + nextState(before, rankOfPacked(v));
  }
  if (vals)
    for (let ch = 0; ch < vals.length; ch++) {
      const cv = vals[ch];
      if (!cv) continue;
      const value = carried[ch];
      if (value === undefined) {
        cv.splice(k, 0, inherit(cv, k));
        continue;
      }
      const x = stored(t, value) + 1;
      cv.splice(k, 0, x);
      for (let j = k + 1; j < cv.length && cv[j]! <= 0; j++) cv[j] = -x;
    }
  if (sink) for (let j = first; j <= end && j < tl.length; j++) emit(t, j, 1, sink);
  return k;
}

/** Every segment of a timeline, with one sign. */
export function forEachSegment(t: Timeline, sign: 1 | -1, sink: SegmentSink): void {
  for (let j = 0; j < t.tl.length; j++) emit(t, j, sign, sink);
}
