import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { login } from '../helpers/api.js';
import { drained, eventually, makeTenant, root, startService } from '../helpers/env.js';
import { makeStream, MediaServer } from '../helpers/media.js';

// The CMCD collector proven with real players: hls.js, dash.js and Shaka Player from npm play a stream ffmpeg made,
// in Debian's Chromium, each configured with the snippet docs/cmcd.md gives (one CMCD v2 event target at Darshak).
// Two viewers per player, side by side: one starts, stalls when its segment server is held, recovers, pauses, seeks
// and plays to the end; the other starts and meets a fatal error when its segments go missing. What each page saw
// (its video element's events, its player's errors) is then checked against Darshak's answers.

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const missing = [
  existsSync(chromiumPath) ? '' : `no Chromium at ${chromiumPath} (apt-get install chromium, or set CHROMIUM_PATH)`,
  spawnSync('ffmpeg', ['-version']).status === 0 ? '' : 'no ffmpeg (apt-get install ffmpeg)',
].filter(Boolean);
if (missing.length > 0) {
  // CI installs both (.ci/run); elsewhere a missing tool skips rather than fails.
  if (process.env.CI) throw new Error(missing.join('; '));
  t.plan(0, missing.join('; '));
  process.exit(0);
}
t.setTimeout(600_000);

const docs = readFileSync(join(root, 'docs/cmcd.md'), 'utf8');
/** The configuration snippet docs/cmcd.md gives for a player, as it stands there. */
function snippet(label: string): string {
  const m = new RegExp(`^${label.replace(/[.()]/g, '\\$&')}:\\n\\n\`\`\`js\\n([\\s\\S]*?)\\n\`\`\``, 'm').exec(docs);
  if (!m) throw new Error(`docs/cmcd.md has no snippet under "${label}:"`);
  return m[1]!;
}
const docsUrl = 'https://ingest.example.com/v1/ingest/cmcd?api_key=dk_live_…';

interface Player {
  name: string;
  lib: string;
  file: string;
  /** Runs in the page (inside an async function): creates the player from the docs' snippet and plays `src`. */
  setup(src: string, target: string): string;
  /** What the page logs when a stall starts and ends. */
  stall: [start: string, end: string];
  /**
   * Whether the player reports its play states (`e=ps`, `sta`), without which Darshak cannot tell startup,
   * rebuffering or a fatal error from a heartbeat (docs/cmcd.md "Players").
   */
  playStates: boolean;
}

// Small buffers so that a held segment server starves the player within seconds, and few retries so that missing
// segments fail it within seconds; a held segment must not time out (the hold is shorter than every timeout here).
const players: Player[] = [
  {
    name: 'hls.js',
    lib: 'hls.js',
    file: 'node_modules/hls.js/dist/hls.min.js',
    stall: ['waiting', 'playing'],
    playStates: true,
    setup: (src, target) => `
      const errorRetry = { maxNumRetry: 1, retryDelayMs: 100, maxRetryDelayMs: 200 };
      const tuning = { maxBufferLength: 3, maxMaxBufferLength: 4, backBufferLength: 0,
        fragLoadPolicy: { default: { maxTimeToFirstByteMs: 30000, maxLoadTimeMs: 60000, timeoutRetry: null, errorRetry } } };
      const Hls = Object.assign(function (config) { return new window.Hls({ ...tuning, ...config }); }, { Events: window.Hls.Events });
      ${snippet('hls.js (1.7.x)').replace(docsUrl, target)}
      hls.on(Hls.Events.ERROR, (_, d) => { if (d.fatal) mark('fatal', { detail: d.details }); });
      hls.on(window.Hls.Events.LEVEL_SWITCHED, (_, d) => mark('level', { level: d.level }));
      hls.loadSource(${JSON.stringify(src)});
      hls.attachMedia(v);
      mark('intent', {});
      await v.play();`,
  },
  {
    name: 'dash.js',
    lib: 'dash.js',
    file: 'node_modules/dashjs/dist/modern/umd/dash.all.min.js',
    stall: ['waiting', 'playing'],
    playStates: true,
    setup: (src, target) => `
      const player = dashjs.MediaPlayer().create();
      ${snippet('dash.js (5.2.x)').replace(docsUrl, target)}
      player.updateSettings({ streaming: {
        buffer: { bufferTimeAtTopQuality: 3, bufferTimeAtTopQualityLongForm: 3, stableBufferTime: 3, bufferToKeep: 0 },
        retryAttempts: { MediaSegment: 1 }, retryIntervals: { MediaSegment: 100 } } });
      player.on(dashjs.MediaPlayer.events.ERROR, (e) => mark('fatal', { detail: String(e.error && e.error.code) }));
      player.on(dashjs.MediaPlayer.events.QUALITY_CHANGE_RENDERED, (e) => mark('level', { level: e.newQuality }));
      mark('intent', {});
      player.initialize(v, ${JSON.stringify(src)}, true);`,
  },
  {
    name: 'Shaka Player',
    lib: 'shaka.js',
    file: 'node_modules/shaka-player/dist/shaka-player.compiled.js',
    stall: ['stall', 'unstall'],
    playStates: false,
    setup: (src, target) => `
      shaka.polyfill.installAll();
      const player = new shaka.Player();
      ${snippet('Shaka Player (5.2.x)').replace(docsUrl, target)}
      await player.attach(v);
      player.configure({ streaming: { bufferingGoal: 3, rebufferingGoal: 0.5, bufferBehind: 0,
        retryParameters: { maxAttempts: 2, baseDelay: 100, backoffFactor: 1, fuzzFactor: 0, timeout: 30000, stallTimeout: 0, connectionTimeout: 30000 } } });
      player.addEventListener('error', (e) => mark(e.detail && e.detail.severity === 2 ? 'fatal' : 'player_error', { detail: String(e.detail && e.detail.code) }));
      // Shaka stalls by setting the playback rate to 0, not by the element's waiting: its own buffering event says so.
      player.addEventListener('buffering', (e) => mark(e.buffering ? 'stall' : 'unstall', {}));
      player.addEventListener('adaptation', () => mark('level', {}));
      mark('intent', {});
      await player.load(${JSON.stringify(src)});
      await v.play();`,
  },
];

/** A page: one video element, every event it fires logged with the time, and the player set up. */
function pageHtml(player: Player, viewer: string, setup: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${player.name} ${viewer}</title></head><body>
<video id="v" muted playsinline width="320" height="180"></video>
<script src="/lib/${player.lib}"></script>
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

interface Entry {
  type: string;
  t: number;
  ct: number;
  detail?: string;
  message?: string;
}

const log = (page: Page): Promise<Entry[]> => page.evaluate('window.log') as Promise<Entry[]>;

/** Wait until the page has logged `type` after time `after` (and fail with its log when it does not). */
async function logged(page: Page, type: string, after: number, ms: number): Promise<Entry> {
  const seen = await page
    .waitForFunction(`log.find((e) => e.type === ${JSON.stringify(type)} && e.t >= ${after})`, undefined, { timeout: ms, polling: 50 })
    .then((h) => h.jsonValue() as Promise<Entry>)
    .catch(() => undefined);
  if (!seen) throw new Error(`the page did not log "${type}" within ${ms} ms; its log: ${JSON.stringify(await log(page))}`);
  return seen;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What a page saw of its playback. */
interface Seen {
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

function seen(entries: readonly Entry[], [stallStart, stallEnd]: Player['stall']): Seen {
  const at = (type: string, from = 0): Entry | undefined => entries.find((e) => e.type === type && e.t >= from);
  const play = at('play')!;
  const first = at('playing', play.t)!;
  const end = entries.find((e) => e.type === 'ended' || e.type === 'fatal')!;
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
    if (e.type === 'pause' && e !== end) pausedMs += (entries.slice(i + 1).find((x) => x.type === 'play') ?? end).t - e.t;
  }
  const startupWait = entries.find((e) => e.type === 'waiting' && e.t >= play.t && e.t < first.t);
  return { startupWaitMs: startupWait ? first.t - startupWait.t : 0, startupMs: first.t - play.t, startupFromIntentMs: first.t - at('intent')!.t, stallMs, seekWaitMs, watchMs: end.t - first.t - pausedMs, firstFrame: first.t, end: end.t, fatal: end.type === 'fatal' };
}

const stream = makeStream(20);
const media = await MediaServer.start(stream.dir, Object.fromEntries(players.map((p) => [p.lib, join(root, p.file)])));
const dataDir = mkdtempSync(join(tmpdir(), 'darshak-players-'));
const svc = await startService({ data_dir: dataDir }, 'all');
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
let browser: Browser | undefined;
t.teardown(async () => {
  await browser?.close();
  await media.close();
  await svc.stop();
  stream.remove();
  rmSync(dataDir, { recursive: true, force: true });
});
browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--autoplay-policy=no-user-gesture-required', '--no-first-run', '--disable-background-networking', '--disable-component-update'],
});

/** The viewer who stalls, pauses, seeks and plays to the end. */
async function fullPlayback(page: Page, viewer: string, [stallStart, stallEnd]: Player['stall']): Promise<void> {
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
async function failedPlayback(page: Page, viewer: string): Promise<void> {
  await logged(page, 'playing', 0, 20_000);
  await sleep(3000);
  const failed = Date.now();
  media.fail(viewer);
  await logged(page, 'fatal', failed, 60_000);
}

interface QosItem {
  region: string;
  watch_hours: number;
  rebuffer_rate: number;
  startups: number;
  startup_p50_ms: number;
  sessions_started: number;
  fatal_sessions: number;
  error_rate: number;
}

async function get<T>(token: string, path: string): Promise<T> {
  const r = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

for (const player of players) {
  t.test(`${player.name} reports through CMCD what its page saw`, async (t: Test) => {
    const slug = player.lib.replace(/\W/g, '');
    const tenant = await makeTenant(svc.config.nats_prefix, slug, 'enterprise');
    const target = `${svc.ingestUrl}/v1/ingest/cmcd?api_key=${tenant.key}`;
    const context = await browser!.newContext();
    t.teardown(() => context.close());
    // Every report batch the players sent, and Darshak's answer.
    const sent: Array<{ body: string; status?: number; answer?: string }> = [];
    let inFlight = 0;
    let lastReport = 0;
    context.on('request', (req) => {
      if (!req.url().startsWith(`${svc.ingestUrl}/v1/ingest/cmcd`) || req.method() !== 'POST') return;
      inFlight++;
      lastReport = Date.now();
    });
    context.on('requestfailed', (req) => {
      if (!req.url().startsWith(`${svc.ingestUrl}/v1/ingest/cmcd`) || req.method() !== 'POST') return;
      inFlight--;
      sent.push({ body: req.postData() ?? '', answer: `failed: ${req.failure()?.errorText}` });
    });
    context.on('requestfinished', (req) => {
      if (!req.url().startsWith(`${svc.ingestUrl}/v1/ingest/cmcd`) || req.method() !== 'POST') return;
      inFlight--;
      const entry: { body: string; status?: number; answer?: string } = { body: req.postData() ?? '' };
      sent.push(entry);
      void req.response().then(async (res) => {
        entry.status = res?.status();
        entry.answer = await res?.text();
      });
    });
    const viewers = [`${slug}-full`, `${slug}-failed`];
    const pages = await Promise.all(
      viewers.map(async (viewer) => {
        const page = await context.newPage();
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        await page.goto(media.page(viewer, pageHtml(player, viewer, player.setup(`${media.url}/m/${viewer}/${player.lib === 'hls.js' ? 'master.m3u8' : 'manifest.mpd'}`, target))));
        return { page, viewer, errors };
      }),
    );
    const codecs = await pages[0]!.page.evaluate(`MediaSource.isTypeSupported('video/mp4; codecs="avc1.42c01e"')`);
    t.ok(codecs, 'this Chromium plays H.264 through MSE');
    await Promise.all([fullPlayback(pages[0]!.page, viewers[0]!, player.stall), failedPlayback(pages[1]!.page, viewers[1]!)]);
    // The reports of the last moments are sent as they happen: wait until none is in flight and a second passed
    // without one, then until Darshak has aggregated and stored what it accepted.
    await eventually(async () => inFlight === 0 && Date.now() - lastReport > 1000, 15_000, 100);
    t.not(await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200), -1, 'Darshak aggregated and stored every report');
    const logs = await Promise.all(pages.map((p) => log(p.page)));
    const [full, failed] = logs.map((l) => seen(l, player.stall)) as [Seen, Seen];
    const ua = String(await pages[0]!.page.evaluate('navigator.userAgent'));
    t.comment(`${player.name} page: ${JSON.stringify({ full, failed })}`);
    // What to read when an assertion below fails: every report batch and answer, and what each page logged.
    t.teardown(() => {
      if (!t.passing()) t.comment(`${player.name} reports: ${JSON.stringify(sent)}\npage logs: ${JSON.stringify(logs)}`);
    });
    t.same(pages.flatMap((p) => p.errors), [], 'no page error');
    t.ok(full.stallMs > 500, 'the held segment server stalled the full playback');
    t.notOk(full.fatal, 'the full playback ended');
    t.ok(failed.fatal, 'the missing segments failed the other');

    const token = await login(base, `owner@${slug}.test`);
    t.same(
      sent.filter((r) => r.status !== 200),
      [],
      'every batch the players and pages sent was answered 200',
    );
    if (!player.playStates) {
      // Shaka Player 5.2's compiled builds send no play state (docs/cmcd.md "Players"): Darshak gets heartbeats,
      // bitrate changes and errors only, so it can tell who watches and on what, not startup, stalls or failures.
      t.notOk(
        sent.some((r) => /(^|,)sta=/m.test(r.body)),
        `${player.name} sent no play state; when this fails it does, and docs/cmcd.md and this test should say so`,
      );
    } else {
      const qos = await get<QosItem[]>(token, '/v1/analytics/qos?range=24h');
      t.equal(qos.length, 1, `one region, both viewers being local: ${JSON.stringify(qos)}`);
      const q = qos[0]!;
      t.match(q, { sessions_started: 2, startups: 2, fatal_sessions: 1 }, 'two sessions started, two first frames, one fatal error');
      t.equal(q.error_rate, 50, 'error rate: one of two sessions failed');

      // Startup: a player reports starting somewhere between the page's request to play and the element's play
      // event (hls.js on that event, dash.js at its autoplay load), and playing from the element's first playing.
      // The p50 is a histogram bucket's upper bound (buckets 5 % wide), and of two sessions it is the smaller's.
      const low = Math.min(full.startupMs, failed.startupMs);
      const high = Math.min(full.startupFromIntentMs, failed.startupFromIntentMs);
      t.ok(q.startup_p50_ms >= low - 50 && q.startup_p50_ms <= high * 1.05 + 50, `startup p50 ${q.startup_p50_ms} ms, the page's ${low}–${high} ms`);

      // Watch time and rebuffering are spans between reports; each end is a report's time against an element
      // event's, milliseconds apart, so the bound is what a few report round trips and the last report's flight can
      // take. A wait while seeking or before the first frame is rebuffering to a player that reports it so (hls.js
      // reports a seek's waiting as `r`, dash.js also the waiting before the first frame).
      const watchMs = q.watch_hours * 3_600_000;
      const rebufferMs = (q.rebuffer_rate / 100) * watchMs;
      const pageWatch = full.watchMs + failed.watchMs;
      const pageStall = full.stallMs + failed.stallMs;
      const pageOtherWaits = full.seekWaitMs + full.startupWaitMs + failed.startupWaitMs;
      t.comment(`${player.name} Darshak: watch ${Math.round(watchMs)} ms, rebuffer ${Math.round(rebufferMs)} ms; page: watch ${pageWatch} ms, stalls ${pageStall} ms, other waits ${pageOtherWaits} ms`);
      t.ok(watchMs >= pageWatch - 500 - pageWatch * 0.03 && watchMs <= pageWatch + pageOtherWaits + 500 + pageWatch * 0.03, `watch time ${Math.round(watchMs)} ms against the page's ${pageWatch} ms`);
      t.ok(rebufferMs >= pageStall - 300 && rebufferMs <= pageStall + pageOtherWaits + 300, `rebuffering ${Math.round(rebufferMs)} ms against the page's stalls of ${pageStall} ms`);
    }

    const devices = await get<Array<{ device: string; sessions: number }>>(token, '/v1/analytics/devices?range=24h');
    t.match(devices, [{ sessions: 2 }], `both sessions on one device class (${ua})`);
    t.equal(devices.length, 1, 'one device class');

    // Concurrency: the two pages played side by side (each from its first frame to its end).
    const overlap = Math.min(full.end, failed.end) > Math.max(full.firstFrame, failed.firstFrame);
    const concurrency = await get<{ peak: number }>(token, '/v1/analytics/concurrency?range=24h&interval=1');
    t.equal(concurrency.peak, overlap ? 2 : 1, 'peak concurrency: the viewers who played at once');
  });
}
