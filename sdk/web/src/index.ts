// @darshak/web: monitor a <video> element, or the hls.js, dash.js or Shaka player driving it, with three lines:
//
//   import { monitor } from '@darshak/web';
//   const m = monitor(video, { ingestUrl, apiKey, content: { id: 'final-live', title: 'The Final' } });
//   // later: m.update({ content: … }) for the next title, m.end() when the player goes away
//
// docs/sdk-web.md has every option, its default, and what each event means.

import { adapterFor, type PlayerRef } from './adapters.js';
import { Tracker, type Content, type SdkEvent, type Viewer } from './tracker.js';
import { Transport } from './transport.js';

export type { Content, PlayerRef, SdkEvent, Viewer };

export interface MonitorOptions {
  /** Darshak's ingest URL, e.g. https://ingest.example.com. */
  ingestUrl: string;
  /** A public ingest key of the tenant (keys can be limited to ingest). */
  apiKey: string;
  content: Content;
  /** The signed-in subscriber (`user_id`); an anonymous id is made and kept in localStorage when absent. */
  viewer?: Viewer;
  /** Custom properties, sent with each play_start. */
  properties?: Record<string, unknown>;
  /** The player library instance driving the element, for what the element cannot tell: renditions, error codes, the CDN. */
  player?: PlayerRef;
  /** `context.app_version` of every event. */
  appVersion?: string;
  /** Share of sessions reported, 0 to 1 (decided once per page); default 1. */
  sampleRate?: number;
  /** Send nothing when the browser says Do Not Track; default false. */
  respectDoNotTrack?: boolean;
  /** Called with what could not be sent; default none. */
  onError?: (message: string) => void;
}

export interface Monitor {
  /** Another title or viewer from the next play on (the current session keeps its own). */
  update(o: Partial<Pick<MonitorOptions, 'content' | 'viewer' | 'properties'>>): void;
  /** The player goes away: session_end, everything sent, listeners removed. */
  end(): void;
  /** The session id of the current or last session ('' before the first play). */
  readonly sessionId: string;
}

const flushEveryMs = 10_000;
const anonymousKey = 'darshak_anonymous_id';

function uuid(): string {
  if (typeof crypto !== 'undefined' && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The viewer as given, or an anonymous id kept across visits (a fresh one where storage is refused). */
function viewerOf(v: Viewer | undefined): Viewer {
  if (v?.user_id || v?.anonymous_id) return { ...v };
  let id: string | null = null;
  try {
    id = localStorage.getItem(anonymousKey);
    if (!id) localStorage.setItem(anonymousKey, (id = uuid()));
  } catch {
    id = uuid();
  }
  return { anonymous_id: id ?? uuid() };
}

const noop: Monitor = { update() {}, end() {}, sessionId: '' };

export function monitor(video: HTMLVideoElement, options: MonitorOptions): Monitor {
  const dnt =
    typeof navigator !== 'undefined' &&
    (navigator.doNotTrack === '1' || (window as { doNotTrack?: string }).doNotTrack === '1');
  if ((options.respectDoNotTrack && dnt) || Math.random() >= (options.sampleRate ?? 1)) return noop;
  let content = options.content;
  let viewer = viewerOf(options.viewer);
  let properties = options.properties;
  const adapter = adapterFor(options.player);
  const context: Record<string, string> = { player: adapter.name };
  if (options.appVersion) context.app_version = options.appVersion;
  const transport = new Transport({
    ingestUrl: options.ingestUrl,
    apiKey: options.apiKey,
    fetch: (...a) => fetch(...a),
    beacon:
      typeof navigator !== 'undefined' && navigator.sendBeacon
        ? (url, body) => navigator.sendBeacon(url, body)
        : undefined,
    newId: uuid,
    now: () => Date.now(),
    random: Math.random,
    onError: options.onError,
  });
  const urgent = new Set(['play_start', 'error', 'ended', 'session_end']);
  const make = (): Tracker =>
    new Tracker({
      viewer,
      content,
      properties,
      context,
      newId: uuid,
      now: () => Date.now(),
      position: () => video.currentTime,
      emit: (e) => {
        const cdn = adapter.cdn();
        transport.add(cdn ? { ...e, context: { ...e.context, cdn } } : e);
        if (urgent.has(e.event_type)) void transport.flush();
      },
    });
  let tracker = make();

  const on: Array<[EventTarget, string, EventListener]> = [];
  const listen = (target: EventTarget, type: string, fn: () => void): void => {
    target.addEventListener(type, fn);
    on.push([target, type, fn]);
  };
  listen(video, 'play', () => {
    // A play after the end or a fatal error is a new session, with what `update` set since.
    if (tracker.sessionId !== '' && (video.ended || tracker.closedOrDone)) tracker = make();
    tracker.play();
  });
  listen(video, 'playing', () => tracker.playing());
  listen(video, 'waiting', () => tracker.waiting());
  listen(video, 'seeking', () => tracker.seeking());
  listen(video, 'seeked', () => tracker.seeked());
  listen(video, 'pause', () => tracker.pause(video.ended));
  listen(video, 'ended', () => tracker.ended());
  listen(video, 'error', () => {
    const err = video.error;
    tracker.error(
      err
        ? `MEDIA_ERR_${['', 'ABORTED', 'NETWORK', 'DECODE', 'SRC_NOT_SUPPORTED'][err.code] ?? err.code}`
        : 'MEDIA_ERR',
      true,
      err?.message,
    );
  });
  const detach = adapter.attach({
    rendition: (kbps) => tracker.rendition(kbps),
    buffering: (stalled) => (stalled ? tracker.waiting() : tracker.unstalled()),
    error: (code, fatal, message) => tracker.error(code, fatal, message),
  });
  const goneAway = (): void => {
    tracker.close();
    transport.beacon();
  };
  listen(window, 'pagehide', goneAway);
  listen(document, 'visibilitychange', () => {
    // Hidden may be for good (a mobile tab killed in the background): what is queued goes now, by beacon.
    if (document.visibilityState === 'hidden') transport.beacon();
  });
  const ticker = setInterval(() => tracker.tick(), 1000);
  const flusher = setInterval(() => void transport.flush(), flushEveryMs);

  return {
    get sessionId() {
      return tracker.sessionId;
    },
    update(o) {
      if (o.content) content = o.content;
      if (o.viewer) viewer = viewerOf(o.viewer);
      if (o.properties) properties = o.properties;
    },
    end() {
      clearInterval(ticker);
      clearInterval(flusher);
      for (const [target, type, fn] of on) target.removeEventListener(type, fn);
      detach();
      tracker.close();
      void transport.flush().then(() => transport.beacon());
    },
  };
}
