// One playback session as CONTRACT §5's events: what a player does (play intent, frames, stalls, seeks, pauses,
// renditions, errors, the end) in, the events §6's metrics assume out. No DOM and no timers of its own: the caller
// feeds it the player's signals and calls `tick` (every second is enough), with the time from `now`, so the same
// machine runs under a page's clock and a test's.

/** An event as the ingest API takes it (CONTRACT §5), before the transport adds `event_id`. */
export interface SdkEvent {
  event_type: string;
  ts: string;
  session_id: string;
  user_id?: string;
  anonymous_id?: string;
  content_id?: string;
  content_title?: string;
  content_type?: string;
  position_sec?: number;
  bitrate_kbps?: number;
  context?: Record<string, string>;
  properties?: Record<string, unknown>;
}

export interface Viewer {
  user_id?: string;
  anonymous_id?: string;
}

/** Ingest's content types (docs/ingest.md); it rejects any other. */
export type ContentType = 'movie' | 'series' | 'episode' | 'live' | 'sports' | 'clip' | 'trailer' | 'other';

export interface Content {
  id: string;
  title?: string;
  type?: ContentType;
  duration_sec?: number;
}

export interface TrackerOptions {
  viewer: Viewer;
  content: Content;
  /** Sent with play_start (custom dimensions). */
  properties?: Record<string, unknown>;
  /** `context` of every event: the player's name, an app version, a CDN. */
  context?: Record<string, string>;
  /** A new session id (a UUID). */
  newId(): string;
  now(): number;
  /** The playhead in seconds, as the player says. */
  position(): number;
  emit(e: SdkEvent): void;
  /** A stall shorter than this is not a rebuffer (a decoder hiccup, a rendition switch); default 250 ms. */
  minStallMs?: number;
  /** While playing or rebuffering, a heartbeat this often; default 10 s (CONTRACT §5). */
  heartbeatMs?: number;
}

// `settling`: a seek landed while playing, and frames have not come back yet (that wait belongs to the seek).
type State =
  'idle' | 'starting' | 'playing' | 'paused' | 'stalled' | 'seeking' | 'settling' | 'ended' | 'failed' | 'closed';

export const defaultMinStallMs = 250;
export const defaultHeartbeatMs = 10_000;

export class Tracker {
  private state: State = 'idle';
  private session = '';
  /** The state a seek interrupted (playing or paused), to go back to once it ends. */
  private beforeSeek: 'playing' | 'paused' = 'playing';
  /** When the current stall began, and whether its rebuffer_start went out. */
  private stallSince = 0;
  private stallReported = false;
  private lastBeat = 0;
  /** The playhead where a seek landed: moving on from it, playback is back even without a `playing` event. */
  private settleFrom = 0;
  private lastTs = 0;
  private bitrate = 0;
  private readonly minStallMs: number;
  private readonly heartbeatMs: number;

  constructor(private readonly o: TrackerOptions) {
    this.minStallMs = o.minStallMs ?? defaultMinStallMs;
    this.heartbeatMs = o.heartbeatMs ?? defaultHeartbeatMs;
  }

  get sessionId(): string {
    return this.session;
  }

  /** Ended, failed or closed: a play now starts a new session. */
  get closedOrDone(): boolean {
    return this.state === 'ended' || this.state === 'failed' || this.state === 'closed';
  }

  /** The viewer asked to play (the element's `play`): a session starts, or a paused one resumes. */
  play(): void {
    if (this.state === 'idle' || this.state === 'ended' || this.state === 'failed' || this.state === 'closed') {
      this.session = this.o.newId();
      this.state = 'starting';
      this.bitrate = 0;
      const c = this.o.content;
      const properties: Record<string, unknown> = { ...this.o.properties };
      if (c.duration_sec !== undefined && c.duration_sec > 0) properties.duration_sec = c.duration_sec;
      this.send('play_start', {
        ...this.o.viewer,
        content_id: c.id,
        ...(c.title !== undefined && { content_title: c.title }),
        ...(c.type !== undefined && { content_type: c.type }),
        ...(Object.keys(properties).length > 0 && { properties }),
      });
      return;
    }
    if (this.state === 'paused') {
      this.state = 'playing';
      this.lastBeat = this.o.now();
      this.send('resume');
    }
  }

  /** Frames are shown (the element's `playing`): the first frame, the end of a stall, a seek's end of buffering. */
  playing(): void {
    if (this.state === 'starting') {
      this.state = 'playing';
      this.lastBeat = this.o.now();
      this.send('first_frame');
      return;
    }
    if (this.state === 'stalled') this.endStall();
    if (this.state === 'stalled' || this.state === 'paused' || this.state === 'settling') {
      // `playing` after a pause without `play` (some players): it resumed.
      if (this.state === 'paused') this.send('resume');
      this.state = 'playing';
      this.lastBeat = this.o.now();
    }
  }

  /** Playback waits for data (the element's `waiting`): a stall, unless starting up or seeking. */
  waiting(): void {
    if (this.state !== 'playing') return;
    this.state = 'stalled';
    this.stallSince = this.o.now();
    this.stallReported = false;
  }

  /** A player's own "no longer stalled" (Shaka's buffering event): ends a stall, and nothing else (not startup). */
  unstalled(): void {
    if (this.state !== 'stalled') return;
    this.endStall();
    this.state = 'playing';
    this.lastBeat = this.o.now();
  }

  /** A seek begins (the element's `seeking`); one seek_start for a run of seeks. */
  seeking(): void {
    if (this.state === 'playing' || this.state === 'paused' || this.state === 'stalled' || this.state === 'settling') {
      if (this.state === 'stalled') this.endStall();
      this.beforeSeek = this.state === 'paused' ? 'paused' : 'playing';
      this.state = 'seeking';
      this.send('seek_start');
    }
  }

  /** The seek landed (the element's `seeked`); buffering until the next `playing` belongs to the seek. */
  seeked(): void {
    if (this.state !== 'seeking') return;
    this.send('seek_end');
    this.state = this.beforeSeek === 'paused' ? 'paused' : 'settling';
    this.settleFrom = this.o.position();
  }

  /** The viewer paused (the element's `pause`, not the one that comes with the end of the media). */
  pause(atEnd = false): void {
    if (atEnd || (this.state !== 'playing' && this.state !== 'stalled' && this.state !== 'settling')) return;
    if (this.state === 'stalled') this.endStall();
    this.state = 'paused';
    this.send('pause');
  }

  /** Played to the end. */
  ended(): void {
    if (this.state === 'idle' || this.state === 'ended' || this.state === 'failed' || this.state === 'closed') return;
    if (this.state === 'stalled') this.endStall();
    this.state = 'ended';
    this.send('ended');
  }

  /** An error; a fatal one ends the session. */
  error(code: string, fatal: boolean, message?: string): void {
    if (this.state === 'idle' || this.state === 'failed' || this.state === 'closed') return;
    // A stall the error ends was rebuffering until then (the error closes the session's rebuffer, §6).
    if (fatal) this.reportStall(this.o.now());
    this.send('error', {
      properties: { code, fatal, ...(message !== undefined && { message: message.slice(0, 200) }) },
    });
    if (fatal) this.state = 'failed';
  }

  /** The rendition played now (kbps); a change is a bitrate_change. */
  rendition(kbps: number): void {
    const k = Math.round(kbps);
    if (!(k > 0) || k === this.bitrate) return;
    const first = this.bitrate === 0;
    this.bitrate = k;
    if (!first && this.state !== 'idle' && this.state !== 'closed') this.send('bitrate_change', { bitrate_kbps: k });
  }

  /** The player is closed (page hidden for good, `end()`): session_end, once. */
  close(): void {
    if (this.state === 'idle' || this.state === 'closed') return;
    if (this.state === 'stalled') this.endStall();
    const after = this.state === 'ended' || this.state === 'failed';
    this.state = 'closed';
    // An ended or failed session already closed (§6): its session_end only says the player went away.
    if (!after) this.send('session_end');
  }

  /** Time passes: a stall long enough becomes a rebuffer, and heartbeats go out while playing or rebuffering. */
  tick(): void {
    const now = this.o.now();
    if (this.state === 'settling' && this.o.position() > this.settleFrom + 0.1) {
      this.state = 'playing';
      this.lastBeat = now;
    }
    this.reportStall(now);
    if (
      (this.state === 'playing' || (this.state === 'stalled' && this.stallReported)) &&
      now - this.lastBeat >= this.heartbeatMs
    ) {
      this.lastBeat = now;
      this.send('heartbeat');
    }
  }

  /**
   * A stall that lasted long enough is a rebuffer from when it began: said at the page's next tick, or when it ends if
   * that comes first (ticks are a second apart; a stall of half a second falls between two).
   */
  private reportStall(now: number): void {
    if (this.state === 'stalled' && !this.stallReported && now - this.stallSince >= this.minStallMs) {
      this.stallReported = true;
      this.send('rebuffer_start', {}, this.stallSince);
    }
  }

  private endStall(): void {
    this.reportStall(this.o.now());
    if (this.stallReported) this.send('rebuffer_end');
    this.stallReported = false;
  }

  /** An event of this session; its ts never goes back in time, nor repeats (the server orders a session by ts). */
  private send(type: string, fields: Partial<SdkEvent> = {}, at = this.o.now()): void {
    const ts = Math.max(Math.floor(at), this.lastTs + 1);
    this.lastTs = ts;
    const position = this.o.position();
    const e: SdkEvent = { event_type: type, ts: new Date(ts).toISOString(), session_id: this.session, ...fields };
    // Whole seconds: ingest takes `position_sec` as an integer (docs/ingest.md).
    if (Number.isFinite(position) && position >= 0) e.position_sec = Math.floor(position);
    if (this.o.context && Object.keys(this.o.context).length > 0) e.context = this.o.context;
    this.o.emit(e);
  }
}
