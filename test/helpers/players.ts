import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { Test } from 'tap';
import { root, startService, type Service } from './env.js';
import { makeStream } from '../../examples/sample-stream.js';
import { MediaServer } from './media.js';

// Real players in a real browser, shared by the tests that prove a collection path with them (CMCD, the web SDK): a
// page per viewer that logs its video element's events, what it saw of its playback, and the two scripted viewers.

export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Chromium and ffmpeg, or the test skips (fails under CI, which installs both: .ci/run). */
export function needBrowserAndFfmpeg(t: Test): void {
  const missing = [
    existsSync(chromiumPath) ? '' : `no Chromium at ${chromiumPath} (apt-get install chromium, or set CHROMIUM_PATH)`,
    spawnSync('ffmpeg', ['-version']).status === 0 ? '' : 'no ffmpeg (apt-get install ffmpeg)',
  ].filter(Boolean);
  if (missing.length === 0) return;
  if (process.env.CI) throw new Error(missing.join('; '));
  t.plan(0, missing.join('; '));
  process.exit(0);
}

export const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--autoplay-policy=no-user-gesture-required',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
];

/** What the page logs when a stall starts and ends: the element's waiting and playing, or a player's own events. */
export type Stall = [start: string, end: string];

/** A page: one video element, every event it fires logged with the time, and the player set up. */
export function pageHtml(
  player: { name: string; lib: string },
  viewer: string,
  setup: string,
  scripts: readonly string[] = [],
): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${player.name} ${viewer}</title></head><body>
<video id="v" muted playsinline width="320" height="180"></video>
${player.lib ? `<script src="/lib/${player.lib}"></script>` : ''}${scripts.map((src) => `\n<script src="${src}"></script>`).join('')}
<script>
window.log = [];
const v = document.getElementById('v');
const deviceId = ${JSON.stringify(`device-${viewer}`)};
window.mark = (type, extra) => log.push({ type, t: Date.now(), ct: v.currentTime, ...extra });
for (const type of ['play', 'playing', 'waiting', 'pause', 'seeking', 'seeked', 'ended', 'error']) v.addEventListener(type, () => mark(type, {}));
(async () => {
  try {${setup}
  } catch (e) { mark('setup_failed', { message: String((e && e.stack) || e) }); }
})();
</script></body></html>`;
}

export interface Entry {
  type: string;
  t: number;
  ct: number;
  detail?: string;
  message?: string;
}

export const log = (page: Page): Promise<Entry[]> => page.evaluate<Entry[]>('window.log');

/** Wait until the page has logged `type` after time `after` (and fail with its log when it does not). */
export async function logged(page: Page, type: string, after: number, ms: number): Promise<Entry> {
  const seen = await page
    .waitForFunction(`log.find((e) => e.type === ${JSON.stringify(type)} && e.t >= ${after})`, undefined, {
      timeout: ms,
      polling: 50,
    })
    .then((h) => h.jsonValue() as Promise<Entry>)
    .catch(() => undefined);
  if (!seen)
    throw new Error(`the page did not log "${type}" within ${ms} ms; its log: ${JSON.stringify(await log(page))}`);
  return seen;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What a page saw of its playback. */
export interface Seen {
  /** From the element's play event to its first playing. */
  startupMs: number;
  /** From the page's request to play (load or play call) to the first playing. */
  startupFromIntentMs: number;
  /** Stalls: waiting → playing (or → the fatal error) after the first frame, not while seeking. */
  stallMs: number;
  /** Waits while seeking, and before the first frame: players differ in whether they report them as rebuffering. */
  seekWaitMs: number;
  startupWaitMs: number;
  /** Playing or stalled: first frame → end, less pauses. */
  watchMs: number;
  firstFrame: number;
  end: number;
  fatal: boolean;
}

export function seen(entries: readonly Entry[], [stallStart, stallEnd]: Stall): Seen {
  const at = (type: string, from = 0): Entry | undefined => entries.find((e) => e.type === type && e.t >= from);
  const play = at('play')!;
  const first = at('playing', play.t)!;
  // A page the viewer leaves ends with the test's own `left` entry.
  const end = entries.find((e) => e.type === 'ended' || e.type === 'fatal' || e.type === 'left')!;
  let stallMs = 0;
  let seekWaitMs = 0;
  let pausedMs = 0;
  let seeking = false;
  for (const [i, e] of entries.entries()) {
    if (e.t < first.t || e.t > end.t) continue;
    if (e.type === 'seeking') seeking = true;
    if (e.type === 'playing') seeking = false;
    const next = entries.slice(i + 1).find((x) => x.type === stallEnd || x === end);
    if (e.type === stallStart) {
      const ms = (next ?? end).t - e.t;
      if (seeking) seekWaitMs += ms;
      else stallMs += ms;
    }
    if (e.type === 'pause' && e !== end)
      pausedMs += (entries.slice(i + 1).find((x) => x.type === 'play') ?? end).t - e.t;
  }
  const startupWait = entries.find((e) => e.type === 'waiting' && e.t >= play.t && e.t < first.t);
  return {
    startupWaitMs: startupWait ? first.t - startupWait.t : 0,
    startupMs: first.t - play.t,
    startupFromIntentMs: first.t - at('intent')!.t,
    stallMs,
    seekWaitMs,
    watchMs: end.t - first.t - pausedMs,
    firstFrame: first.t,
    end: end.t,
    fatal: end.type === 'fatal',
  };
}

/** The viewer who stalls, pauses, seeks and plays to the end. */
export async function fullPlayback(
  media: MediaServer,
  page: Page,
  viewer: string,
  [stallStart, stallEnd]: Stall,
): Promise<void> {
  const first = await logged(page, 'playing', 0, 20_000);
  await sleep(2000);
  const held = Date.now();
  media.hold(viewer);
  const stall = await logged(page, stallStart, held, 30_000);
  await sleep(2500);
  media.release(viewer);
  await logged(page, stallEnd, stall.t, 20_000);
  await sleep(1000);
  const paused = Date.now();
  await page.evaluate('v.pause()');
  await logged(page, 'pause', paused, 5000);
  await sleep(1500);
  const resumed = Date.now();
  await page.evaluate('v.play()');
  await logged(page, 'playing', resumed, 10_000);
  await sleep(1000);
  const sought = Date.now();
  await page.evaluate('v.currentTime = 15');
  await logged(page, 'seeked', sought, 10_000);
  await logged(page, 'ended', first.t, 30_000);
}

/** The viewer whose segments go missing a few seconds in. */
export async function failedPlayback(media: MediaServer, page: Page, viewer: string): Promise<void> {
  await logged(page, 'playing', 0, 20_000);
  await sleep(3000);
  const failed = Date.now();
  media.fail(viewer);
  await logged(page, 'fatal', failed, 60_000);
}

/**
 * The player libraries the tests play with, tuned alike: small buffers, so that a held segment server stalls a player
 * within seconds, and few retries, so that missing segments fail it within seconds (a held segment must not time out:
 * the hold is shorter than every timeout here). `config` is a JavaScript literal for the page; `start(p, src)` logs
 * the player `p`'s fatal errors, rendition switches and, for Shaka, its stalls, then has it play `src`.
 */
export const libraries = {
  hls: {
    name: 'hls.js',
    lib: 'hls.js',
    file: 'node_modules/hls.js/dist/hls.min.js',
    stall: ['waiting', 'playing'] as Stall,
    config: `{ maxBufferLength: 3, maxMaxBufferLength: 4, backBufferLength: 0,
        fragLoadPolicy: { default: { maxTimeToFirstByteMs: 30000, maxLoadTimeMs: 60000, timeoutRetry: null, errorRetry: { maxNumRetry: 1, retryDelayMs: 100, maxRetryDelayMs: 200 } } } }`,
    start: (p: string, src: string): string => `
      ${p}.on(window.Hls.Events.ERROR, (_, d) => { if (d.fatal) mark('fatal', { detail: d.details }); });
      ${p}.on(window.Hls.Events.LEVEL_SWITCHED, (_, d) => mark('level', { level: d.level }));
      ${p}.loadSource(${JSON.stringify(src)});
      ${p}.attachMedia(v);
      mark('intent', {});
      await v.play();`,
  },
  dash: {
    name: 'dash.js',
    lib: 'dash.js',
    file: 'node_modules/dashjs/dist/modern/umd/dash.all.min.js',
    stall: ['waiting', 'playing'] as Stall,
    config: `{ streaming: {
        buffer: { bufferTimeAtTopQuality: 3, bufferTimeAtTopQualityLongForm: 3, stableBufferTime: 3, bufferToKeep: 0 },
        retryAttempts: { MediaSegment: 1 }, retryIntervals: { MediaSegment: 100 } } }`,
    start: (p: string, src: string): string => `
      ${p}.on(dashjs.MediaPlayer.events.ERROR, (e) => mark('fatal', { detail: String(e.error && e.error.code) }));
      ${p}.on(dashjs.MediaPlayer.events.QUALITY_CHANGE_RENDERED, (e) => mark('level', { level: e.newQuality }));
      mark('intent', {});
      ${p}.initialize(v, ${JSON.stringify(src)}, true);`,
  },
  shaka: {
    name: 'Shaka Player',
    lib: 'shaka.js',
    file: 'node_modules/shaka-player/dist/shaka-player.compiled.js',
    // Shaka stalls by setting the playback rate to 0, not by the element's waiting: its own buffering event says so.
    stall: ['stall', 'unstall'] as Stall,
    config: `{ streaming: { bufferingGoal: 3, rebufferingGoal: 0.5, bufferBehind: 0,
        retryParameters: { maxAttempts: 2, baseDelay: 100, backoffFactor: 1, fuzzFactor: 0, timeout: 30000, stallTimeout: 0, connectionTimeout: 30000 } } }`,
    start: (p: string, src: string): string => `
      ${p}.addEventListener('error', (e) => mark(e.detail && e.detail.severity === 2 ? 'fatal' : 'player_error', { detail: String(e.detail && e.detail.code) }));
      ${p}.addEventListener('buffering', (e) => mark(e.buffering ? 'stall' : 'unstall', {}));
      ${p}.addEventListener('adaptation', () => mark('level', {}));
      mark('intent', {});
      await ${p}.load(${JSON.stringify(src)});
      await v.play();`,
  },
} as const;

/**
 * What a players test runs against: a 20-second stream on a segment server with the libraries, every role of
 * Darshak in this process, and Chromium; all stopped when the test ends.
 */
export async function playersWorld(
  t: Test,
  libs: ReadonlyArray<{ lib: string; file: string }>,
  label: string,
): Promise<{ media: MediaServer; svc: Service; base: string; browser: Browser }> {
  const stream = makeStream(20);
  const media = await MediaServer.start(stream, Object.fromEntries(libs.map((p) => [p.lib, join(root, p.file)])));
  const dataDir = mkdtempSync(join(tmpdir(), `darshak-${label}-`));
  const svc = await startService({ data_dir: dataDir }, 'all');
  let browser: Browser | undefined;
  t.teardown(async () => {
    await browser?.close();
    await media.close();
    await svc.stop();
    stream.remove();
    rmSync(dataDir, { recursive: true, force: true });
  });
  browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  return { media, svc, base: `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`, browser };
}
