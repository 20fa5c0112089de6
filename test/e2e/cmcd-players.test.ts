import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { login } from '../helpers/api.js';
import { drained, eventually, makeTenant, root } from '../helpers/env.js';
import {
  failedPlayback,
  fullPlayback,
  libraries,
  log,
  needBrowserAndFfmpeg,
  pageHtml,
  playersWorld,
  seen,
  type Seen,
  type Stall,
} from '../helpers/players.js';

// The CMCD collector proven with real players: hls.js, dash.js and Shaka Player from npm play a stream ffmpeg made,
// in Debian's Chromium, each configured with the snippet docs/cmcd.md gives (one CMCD v2 event target at Darshak).
// Two viewers per player, side by side: one starts, stalls when its segment server is held, recovers, pauses, seeks
// and plays to the end; the other starts and meets a fatal error when its segments go missing. What each page saw
// (its video element's events, its player's errors) is then checked against Darshak's answers.

needBrowserAndFfmpeg(t);
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
  stall: Stall;
  /**
   * Whether the player reports its play states (`e=ps`, `sta`), without which Darshak cannot tell startup,
   * rebuffering or a fatal error from a heartbeat (docs/cmcd.md "Players").
   */
  playStates: boolean;
}

const players: Player[] = [
  {
    ...libraries.hls,
    playStates: true,
    setup: (src, target) => `
      const tuning = ${libraries.hls.config};
      const Hls = Object.assign(function (config) { return new window.Hls({ ...tuning, ...config }); }, { Events: window.Hls.Events });
      ${snippet('hls.js (1.7.x)').replace(docsUrl, target)}
      ${libraries.hls.start('hls', src)}`,
  },
  {
    ...libraries.dash,
    playStates: true,
    setup: (src, target) => `
      const player = dashjs.MediaPlayer().create();
      ${snippet('dash.js (5.2.x)').replace(docsUrl, target)}
      player.updateSettings(${libraries.dash.config});
      ${libraries.dash.start('player', src)}`,
  },
  {
    ...libraries.shaka,
    playStates: false,
    setup: (src, target) => `
      shaka.polyfill.installAll();
      const player = new shaka.Player();
      ${snippet('Shaka Player (5.2.x)').replace(docsUrl, target)}
      await player.attach(v);
      player.configure(${libraries.shaka.config});
      ${libraries.shaka.start('player', src)}`,
  },
];

const { media, svc, base, browser } = await playersWorld(t, players, 'players');

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

// The players play in real time and wait on their streams more than on the machine: two at once, each with its
// tenant and its browser context.
t.jobs = 2;
for (const player of players) {
  t.test(`${player.name} reports through CMCD what its page saw`, async (t: Test) => {
    const slug = player.lib.replace(/\W/g, '');
    const tenant = await makeTenant(svc.config.nats_prefix, slug, 'enterprise');
    const target = `${svc.ingestUrl}/v1/ingest/cmcd?api_key=${tenant.key}`;
    const context = await browser.newContext();
    t.teardown(() => context.close());
    // Every report batch the players sent, and Darshak's answer.
    const sent: Array<{ body: string; status?: number; answer?: string }> = [];
    const answers: Promise<void>[] = [];
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
      // Read now, awaited before the answers are checked: the context may close first when the test fails early,
      // and a read left floating would then take the process down and hide that failure.
      answers.push(
        req
          .response()
          .then(async (res) => {
            entry.status = res?.status();
            entry.answer = await res?.text();
          })
          .catch((e: unknown) => {
            entry.answer = `unread: ${e instanceof Error ? e.message : String(e)}`;
          }),
      );
    });
    const viewers = [`${slug}-full`, `${slug}-failed`];
    const pages = await Promise.all(
      viewers.map(async (viewer) => {
        const page = await context.newPage();
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        await page.goto(
          media.page(
            viewer,
            pageHtml(
              player,
              viewer,
              player.setup(
                `${media.url}/m/${viewer}/${player.lib === 'hls.js' ? 'master.m3u8' : 'manifest.mpd'}`,
                target,
              ),
            ),
          ),
        );
        return { page, viewer, errors };
      }),
    );
    const codecs = await pages[0]!.page.evaluate(`MediaSource.isTypeSupported('video/mp4; codecs="avc1.42c01e"')`);
    t.ok(codecs, 'this Chromium plays H.264 through MSE');
    await Promise.all([
      fullPlayback(media, pages[0]!.page, viewers[0]!, player.stall),
      failedPlayback(media, pages[1]!.page, viewers[1]!),
    ]);
    // The reports of the last moments are sent as they happen: wait until none is in flight and a second passed
    // without one, then until Darshak has aggregated and stored what it accepted.
    await eventually(async () => inFlight === 0 && Date.now() - lastReport > 1000, 15_000, 100);
    t.not(
      await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200),
      -1,
      'Darshak aggregated and stored every report',
    );
    const logs = await Promise.all(pages.map((p) => log(p.page)));
    const [full, failed] = logs.map((l) => seen(l, player.stall)) as [Seen, Seen];
    const ua = String(await pages[0]!.page.evaluate('navigator.userAgent'));
    t.comment(`${player.name} page: ${JSON.stringify({ full, failed })}`);
    // What to read when an assertion below fails: every report batch and answer, and what each page logged.
    t.teardown(() => {
      if (!t.passing())
        t.comment(`${player.name} reports: ${JSON.stringify(sent)}\npage logs: ${JSON.stringify(logs)}`);
    });
    t.same(
      pages.flatMap((p) => p.errors),
      [],
      'no page error',
    );
    t.ok(full.stallMs > 500, 'the held segment server stalled the full playback');
    t.notOk(full.fatal, 'the full playback ended');
    t.ok(failed.fatal, 'the missing segments failed the other');

    const token = await login(base, `owner@${slug}.test`);
    await Promise.all(answers);
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
      t.match(
        q,
        { sessions_started: 2, startups: 2, fatal_sessions: 1 },
        'two sessions started, two first frames, one fatal error',
      );
      t.equal(q.error_rate, 50, 'error rate: one of two sessions failed');

      // Startup: a player reports starting somewhere between the page's request to play and the element's play
      // event (hls.js on that event, dash.js at its autoplay load), and playing from the element's first playing.
      // The p50 is a histogram bucket's upper bound (buckets 5 % wide), and of two sessions it is the smaller's.
      const low = Math.min(full.startupMs, failed.startupMs);
      const high = Math.min(full.startupFromIntentMs, failed.startupFromIntentMs);
      t.ok(
        q.startup_p50_ms >= low - 50 && q.startup_p50_ms <= high * 1.05 + 50,
        `startup p50 ${q.startup_p50_ms} ms, the page's ${low}–${high} ms`,
      );

      // Watch time and rebuffering are spans between reports; each end is a report's time against an element
      // event's, milliseconds apart, so the bound is what a few report round trips and the last report's flight can
      // take. A wait while seeking or before the first frame is rebuffering to a player that reports it so (hls.js
      // reports a seek's waiting as `r`, dash.js also the waiting before the first frame).
      const watchMs = q.watch_hours * 3_600_000;
      const rebufferMs = (q.rebuffer_rate / 100) * watchMs;
      const pageWatch = full.watchMs + failed.watchMs;
      const pageStall = full.stallMs + failed.stallMs;
      const pageOtherWaits = full.seekWaitMs + full.startupWaitMs + failed.startupWaitMs;
      t.comment(
        `${player.name} Darshak: watch ${Math.round(watchMs)} ms, rebuffer ${Math.round(rebufferMs)} ms; page: watch ${pageWatch} ms, stalls ${pageStall} ms, other waits ${pageOtherWaits} ms`,
      );
      t.ok(
        watchMs >= pageWatch - 500 - pageWatch * 0.03 && watchMs <= pageWatch + pageOtherWaits + 500 + pageWatch * 0.03,
        `watch time ${Math.round(watchMs)} ms against the page's ${pageWatch} ms`,
      );
      t.ok(
        rebufferMs >= pageStall - 300 && rebufferMs <= pageStall + pageOtherWaits + 300,
        `rebuffering ${Math.round(rebufferMs)} ms against the page's stalls of ${pageStall} ms`,
      );
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
