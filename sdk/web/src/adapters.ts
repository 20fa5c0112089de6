// What a player library knows that the <video> element does not: the rendition it plays, the errors that stop it
// with their codes, and the host its segments come from (`context.cdn`). Each adapter listens on the instance it is given and
// is typed by the few members it uses, so the SDK imports no player.

/** The player driving the element, when there is one. */
export type PlayerRef = { hls: HlsLike } | { dash: DashLike } | { shaka: ShakaLike };

type Listener = (...args: never[]) => void;

export interface HlsLike {
  on(event: string, fn: Listener): void;
  off(event: string, fn: Listener): void;
  levels?: ReadonlyArray<{ bitrate?: number }>;
}

export interface DashLike {
  on(event: string, fn: Listener): void;
  off(event: string, fn: Listener): void;
  getBitrateInfoListFor?(type: string): ReadonlyArray<{ bitrate?: number }>;
}

export interface ShakaLike {
  addEventListener(event: string, fn: Listener): void;
  removeEventListener(event: string, fn: Listener): void;
  getVariantTracks?(): ReadonlyArray<{ active?: boolean; bandwidth?: number }>;
}

export interface AdapterSink {
  rendition(kbps: number): void;
  /** The player stalls or plays again by its own account (Shaka stalls by a playback rate of 0, not `waiting`). */
  buffering(stalled: boolean): void;
  error(code: string, fatal: boolean, message?: string): void;
}

export interface Adapter {
  /** `context.player`. */
  name: string;
  /** Start listening; returns the function that stops. */
  attach(sink: AdapterSink): () => void;
  /** The host of the latest segment, or ''. */
  cdn(): string;
}

const hostOf = (url: unknown): string => {
  if (typeof url !== 'string') return '';
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
};

function listenAll(
  on: (e: string, fn: Listener) => void,
  off: (e: string, fn: Listener) => void,
  handlers: Record<string, Listener>,
): () => void {
  for (const [e, fn] of Object.entries(handlers)) on(e, fn);
  return () => {
    for (const [e, fn] of Object.entries(handlers)) off(e, fn);
  };
}

function hls(p: HlsLike): Adapter {
  let host = '';
  return {
    name: 'hls.js',
    cdn: () => host,
    attach: (sink) =>
      listenAll(
        (e, fn) => p.on(e, fn),
        (e, fn) => p.off(e, fn),
        {
          hlsLevelSwitched: (_e: string, d: { level: number }) =>
            sink.rendition((p.levels?.[d.level]?.bitrate ?? 0) / 1000),
          hlsFragLoaded: (_e: string, d: { frag?: { url?: string } }) => (host = hostOf(d.frag?.url) || host),
          // Only what stops playback: hls.js reports each retried load and stall nudge as an error too.
          hlsError: (_e: string, d: { details?: string; fatal?: boolean; reason?: string }) =>
            d.fatal === true && sink.error(String(d.details ?? 'hls_error'), true, d.reason),
        },
      ),
  };
}

function dash(p: DashLike): Adapter {
  let host = '';
  return {
    name: 'dash.js',
    cdn: () => host,
    attach: (sink) =>
      listenAll(
        (e, fn) => p.on(e, fn),
        (e, fn) => p.off(e, fn),
        {
          // dash.js 5 names the representation; 4 gives an index into the bitrate list.
          qualityChangeRendered: (e: {
            mediaType?: string;
            newRepresentation?: { bandwidth?: number };
            newQuality?: number;
          }) => {
            if (e.mediaType !== 'video') return;
            const bps =
              e.newRepresentation?.bandwidth ?? p.getBitrateInfoListFor?.('video')[e.newQuality ?? -1]?.bitrate ?? 0;
            sink.rendition(bps / 1000);
          },
          fragmentLoadingCompleted: (e: { request?: { url?: string } }) => (host = hostOf(e.request?.url) || host),
          // dash.js raises `error` for what stops playback.
          error: (e: { error?: { code?: number | string; message?: string } }) =>
            sink.error(`DASH_${String(e.error?.code ?? 'ERROR')}`, true, e.error?.message),
        },
      ),
  };
}

function shaka(p: ShakaLike): Adapter {
  const rendition = (sink: AdapterSink): void => {
    const active = p.getVariantTracks?.().find((t) => t.active);
    if (active?.bandwidth) sink.rendition(active.bandwidth / 1000);
  };
  return {
    name: 'shaka',
    cdn: () => '',
    attach: (sink) =>
      listenAll(
        (e, fn) => p.addEventListener(e, fn),
        (e, fn) => p.removeEventListener(e, fn),
        {
          adaptation: () => rendition(sink),
          buffering: (e: { buffering?: boolean }) => sink.buffering(e.buffering === true),
          variantchanged: () => rendition(sink),
          // shaka.util.Error: severity 2 is CRITICAL (playback stopped).
          error: (e: { detail?: { code?: number; severity?: number; message?: string } }) =>
            e.detail?.severity === 2 && sink.error(`SHAKA_${String(e.detail.code ?? 'ERROR')}`, true, e.detail.message),
        },
      ),
  };
}

const element: Adapter = { name: 'html5', cdn: () => '', attach: () => () => {} };

export function adapterFor(ref: PlayerRef | undefined): Adapter {
  if (!ref) return element;
  if ('hls' in ref) return hls(ref.hls);
  if ('dash' in ref) return dash(ref.dash);
  return shaka(ref.shaka);
}
