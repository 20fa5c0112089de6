// A session's event timeline and its state machine (docs/metrics.md "Sessions").
//
// Each event is one number: ts × 128 + rank × 8 + state-after. Sorting these numbers sorts by (ts, rank), the
// documented order, which never depends on arrival: a late event is inserted where it would have been on time.
// Packing keeps a session at 8 bytes per event in a plain array (V8 stores it unboxed).

export const State = { none: 0, starting: 1, playing: 2, rebuffering: 3, paused: 4, closed: 5 } as const;
export type State = (typeof State)[keyof typeof State];

export function isActive(state: number): boolean {
  return state >= State.starting && state <= State.rebuffering;
}

/** Watch time accrues after events that leave the session playing or rebuffering. */
export function isWatching(state: number): boolean {
  return state === State.playing || state === State.rebuffering;
}

/** Tie order for equal timestamps (docs/metrics.md): a fatal error has its own rank. */
export const rank = {
  play_start: 0,
  first_frame: 1,
  resume: 2,
  seek_start: 3,
  seek_end: 4,
  rebuffer_start: 5,
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
 * A session's events: `tl` packed as above, and `vals` beside it once any event carried a segment value (bitrate),
 * null before. A value is `v + 1` when the event carried `v` itself, `-(v + 1)` when it inherited `v` from the event
 * before it, and 0 before any event carried one: a segment's value is its first event's, own or inherited.
 */
export interface Timeline {
  tl: number[];
  vals: number[] | null;
}

/**
 * Told each segment that stops being true (-1), then each that becomes true (+1): from an event to the next (`to`
 * null after the last), in the state after the first, with its value (null when none is known). Segments come as
 * numbers, not objects: every event changes two or three, and an object each was garbage made per event.
 */
export interface SegmentSink {
  onSegment(from: number, to: number | null, state: number, value: number | null, sign: 1 | -1): void;
}

const valueOf = (x: number): number | null => (x === 0 ? null : Math.abs(x) - 1);
/** What an event's value is when it carries none: the one before it, as inherited. */
const inherit = (vals: readonly number[], j: number): number => (j === 0 ? 0 : -Math.abs(vals[j - 1]!));

function emit(t: Timeline, j: number, sign: 1 | -1, sink: SegmentSink): void {
  const tl = t.tl;
  const v = tl[j]!;
  const to = j + 1 < tl.length ? tsOf(tl[j + 1]!) : null;
  sink.onSegment(tsOf(v), to, stateOf(v), t.vals === null ? null : valueOf(t.vals[j]!), sign);
}

/**
 * Where an event goes among those of its own (ts, rank), which share one packed number: those carrying a value first,
 * by value, then those carrying none (inheriting). The value after the group is then its largest, whatever the
 * arrival order; an event without one goes last, as before values existed.
 */
function placeInGroup(vals: readonly number[] | null, lo: number, hi: number, value: number | undefined): number {
  if (value === undefined || vals === null) return hi;
  let k = lo;
  while (k < hi && vals[k]! > 0 && vals[k]! - 1 <= value) k++;
  return k;
}

/**
 * Insert an event (carrying `value`, or none) into a timeline, keep every state and value right, and report exactly
 * the segments that changed: the one before the insert (its end moves), the run of state-keeping events after it, up
 * to the next event that sets the state by itself, and, when the event carries a value, the run after it that
 * inherited the one before. Appending, the usual case, touches two segments.
 */
export function insertEvent(
  t: Timeline,
  ts: number,
  r: number,
  value: number | undefined,
  sink: SegmentSink | null,
): number {
  const tl = t.tl;
  const base = ts * 128 + r * 8;
  const n = tl.length;
  if (value !== undefined && t.vals === null) t.vals = new Array<number>(n).fill(0);
  const vals = t.vals;
  if (n === 0 || tl[n - 1]! < base) {
    // After every event so far (the usual case): the last segment gets an end, and a new last one opens.
    if (n > 0 && sink) emit(t, n - 1, -1, sink);
    tl.push(base + nextState(n === 0 ? State.none : stateOf(tl[n - 1]!), r));
    if (vals) vals.push(value === undefined ? inherit(vals, n) : value + 1);
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
  const k = placeInGroup(vals, lo, hi, value);
  // The changed run, in indices before the insert: state-keeping events after it, and those inheriting a value.
  let c = k;
  while (c < n && keepsState(rankOfPacked(tl[c]!))) c++;
  let end = c;
  if (vals && value !== undefined) {
    let v = k;
    while (v < n && vals[v]! <= 0) v++;
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
  if (vals) {
    vals.splice(k, 0, value === undefined ? inherit(vals, k) : value + 1);
    if (value !== undefined)
      for (let j = k + 1; j <= end && j < vals.length && vals[j]! <= 0; j++) vals[j] = -value - 1;
  }
  if (sink) for (let j = first; j <= end && j < tl.length; j++) emit(t, j, 1, sink);
  return k;
}

/** Every segment of a timeline, with one sign. */
export function forEachSegment(t: Timeline, sign: 1 | -1, sink: SegmentSink): void {
  for (let j = 0; j < t.tl.length; j++) emit(t, j, sign, sink);
}
