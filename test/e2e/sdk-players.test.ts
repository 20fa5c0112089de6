import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import t, { type Test } from 'tap';
import type { ConcurrencySeries, DeviceItem } from '../../src/store/queries/answers.js';
import type { QosItem } from '../../pipelines/qos/answer.js';
import { call, login } from '../helpers/api.js';
import { drained, eventually, makeTenant, root } from '../helpers/env.js';
import {
  type Entry,
  failedPlayback,
  fullPlayback,
  libraries,
  log,
  logged,
  needBrowserAndFfmpeg,
  pageHtml,
  playersWorld,
  seen,
  sleep,
  type Seen,
  type Stall,
} from '../helpers/players.js';

// The web SDK proven with real players, as the CMCD collector is (test/e2e/cmcd-players.test.ts, whose harness this
// shares): hls.js, dash.js and Shaka Player play a stream ffmpeg made, in Debian's Chromium, each page loading the
// SDK from Darshak's ingest (/sdk/v1/darshak.js) and calling `Darshak.monitor` with its player. One viewer stalls,
// pauses, seeks and plays to the end; one fails when its segments go missing; one leaves its page mid-play. What the
// pages saw is then checked against Darshak's answers, and the closed page's session_end against its beacon.

needBrowserAndFfmpeg(t);
t.setTimeout(600_000);

interface Player {
  name: string;
  lib: string;
  file: string;
  stall: Stall;
  /** Runs in the page (inside an async function): creates the player, monitors it, plays `src`. */
  setup(src: string, monitor: (player: string) => string): string;
}

const players: Player[] = [
  {
    ...libraries.hls,
    setup: (src, monitor) => `
      const hls = new Hls(${libraries.hls.config});
      ${monitor('{ hls }')}
      ${libraries.hls.start('hls', src)}`,
  },
  {
    ...libraries.dash,
    setup: (src, monitor) => `
      const dash = dashjs.MediaPlayer().create();
      dash.updateSettings(${libraries.dash.config});
      ${monitor('{ dash }')}
      ${libraries.dash.start('dash', src)}`,
  },
  {
    ...libraries.shaka,
    setup: (src, monitor) => `
      shaka.polyfill.installAll();
      const shakaPlayer = new shaka.Player();
      await shakaPlayer.attach(v);
      shakaPlayer.configure(${libraries.shaka.config});
      ${monitor('{ shaka: shakaPlayer }')}
      ${libraries.shaka.start('shakaPlayer', src)}`,
  },
];

const { media, svc, base, browser } = await playersWorld(t, players, 'sdk-players');

interface Sent {
  method: string;
  url: string;
  body: string;
  status: number;
  answer: string;
}

/**
 * A proxy in front of ingest for one test: it records each request and its answer (`sent`), and can be unreachable
 * for a while (`down`: connections are dropped, as a network outage drops them).
 */
async function ingestProxy(
  t: Test,
): Promise<{ url: string; sent: Sent[]; down(ms: number): void; readonly dropped: number }> {
  const log: Sent[] = [];
  let downUntil = 0;
  let dropped = 0;
  const server = createServer((req, res) => {
    if (Date.now() < downUntil) {
      dropped++;
      return void req.socket.destroy();
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'connection' && k !== 'content-length'),
      ) as Record<string, string>;
      void fetch(`${svc.ingestUrl}${req.url}`, {
        method: req.method,
        headers,
        ...(req.method === 'GET' || req.method === 'HEAD' ? {} : { body }),
      })
        .then(async (r) => {
          const answer = Buffer.from(await r.arrayBuffer());
          log.push({
            method: req.method ?? '',
            url: req.url ?? '',
            body: body.toString(),
            status: r.status,
            answer: answer.toString(),
          });
          const out: Record<string, string> = {};
          r.headers.forEach((v, k) => {
            if (k !== 'content-encoding' && k !== 'content-length' && k !== 'transfer-encoding' && k !== 'connection')
              out[k] = v;
          });
          res.writeHead(r.status, out).end(answer);
        })
        // Ingest unreachable (the test is ending): the page sees a gateway error and the log says why.
        .catch((e: unknown) => {
          const answer = e instanceof Error ? e.message : String(e);
          log.push({ method: req.method ?? '', url: req.url ?? '', body: body.toString(), status: 502, answer });
          if (!res.headersSent) res.writeHead(502).end(answer);
        });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sent: log,
    down(ms: number): void {
      downUntil = Date.now() + ms;
    },
    /** Requests dropped while down, so far. */
    get dropped(): number {
      return dropped;
    },
  };
}

// The tests play in real time and wait on the players more than on the machine: two at once, each with its tenant
// and its own proxy.
t.jobs = 2;

for (const player of players.filter((p) => !process.env.SDK_PLAYER || p.lib === process.env.SDK_PLAYER)) {
  t.test(`${player.name} monitored by the web SDK: Darshak's answers are what its pages saw`, async (t: Test) => {
    const slug = `sdk${player.lib.replace(/\W/g, '')}`;
    const tenant = await makeTenant(svc.config.nats_prefix, slug, 'enterprise');
    const context = await browser.newContext();
    t.teardown(() => context.close());
    // Every request the SDK made of ingest, recorded by a proxy in front of it: it sees what a page sends while it
    // goes away (a beacon), which the browser's own request events do not report.
    const proxy = await ingestProxy(t);
    const sent = proxy.sent;
    const viewers = [`${slug}-full`, `${slug}-failed`, `${slug}-closed`];
    const pages = await Promise.all(
      viewers.map(async (viewer) => {
        const page = await context.newPage();
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        const monitor = (ref: string): string =>
          `Darshak.monitor(v, { ingestUrl: ${JSON.stringify(proxy.url)}, apiKey: ${JSON.stringify(tenant.key)}, content: { id: 'sdk-title', title: 'The SDK title', type: 'movie', duration_sec: 20 }, viewer: { anonymous_id: deviceId }, player: ${ref}, appVersion: '5.13.0' });`;
        const src = `${media.url}/m/${viewer}/${player.lib === 'hls.js' ? 'master.m3u8' : 'manifest.mpd'}`;
        await page.goto(
          media.page(viewer, pageHtml(player, viewer, player.setup(src, monitor), [`${proxy.url}/sdk/v1/darshak.js`])),
        );
        return { page, viewer, errors };
      }),
    );
    // What the closed page saw, read as it is left: it may have stalled too, and its stalls count.
    let closedLog: Entry[] = [];
    const closing = async (): Promise<void> => {
      const p = pages[2]!.page;
      await logged(p, 'playing', 0, 20_000);
      await sleep(3000);
      closedLog = [...(await log(p)), { type: 'left', t: Date.now(), ct: 0 }];
      // Leaving the page fires pagehide: the SDK's session_end goes by beacon (the context still sees the request).
      await p.goto('about:blank');
    };
    await Promise.all([
      fullPlayback(media, pages[0]!.page, viewers[0]!, player.stall),
      failedPlayback(media, pages[1]!.page, viewers[1]!),
      closing(),
    ]);
    const logs = await Promise.all(pages.slice(0, 2).map((p) => log(p.page)));
    // The last batches go at the end, the flush and ended: then Darshak aggregates and stores them.
    await Promise.all(pages.slice(0, 2).map((p) => p.page.close({ runBeforeUnload: true })));
    await eventually(
      async () => sent.some((s) => s.url.includes('/beacon') && s.body.includes('"session_end"')),
      15_000,
      100,
    );
    t.not(
      await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200),
      -1,
      'Darshak aggregated and stored every batch',
    );
    const [full, failed] = logs.map((l) => seen(l, player.stall)) as [Seen, Seen];
    const closed = seen(closedLog, player.stall);
    t.comment(`${player.name} page: ${JSON.stringify({ full, failed, closed })}`);
    t.teardown(() => {
      if (!t.passing())
        t.comment(
          `${player.name} batches: ${JSON.stringify(sent)}\npage logs: ${JSON.stringify([...logs, closedLog])}`,
        );
    });
    t.same(
      pages.flatMap((p) => p.errors),
      [],
      'no page error',
    );
    t.ok(full.stallMs > 500, 'the held segment server stalled the full playback');
    t.ok(failed.fatal, 'the missing segments failed the other');
    t.same(
      sent
        .filter((s) => s.method === 'POST' && (s.status !== 200 || !/"rejected":0/.test(s.answer)))
        .map((s) => `${s.url} ${s.status} ${s.answer}`),
      [],
      'every batch answered 200, every event accepted',
    );
    t.ok(
      sent.some((s) => s.url.includes('/v1/ingest/beacon') && s.body.includes('"session_end"')),
      'the page left said session_end by beacon',
    );

    const token = await login(base, `owner@${slug}.test`);
    const qos = (await call(base, 'GET', '/v1/analytics/qos?range=24h', { token })).body as QosItem[];
    t.equal(qos.length, 1, `one region, the viewers being local: ${JSON.stringify(qos)}`);
    const q = qos[0]!;
    t.match(
      q,
      { sessions_started: 3, startups: 3, fatal_sessions: 1 },
      'three sessions started, three first frames, one fatal error',
    );
    // Startup: from the element's play event (the SDK's play_start) to its first playing; the p50 of three is the
    // middle one, read as its histogram bucket's upper bound (5 % wide).
    t.ok(
      q.startup_p50_ms >= Math.min(full.startupMs, failed.startupMs) - 50,
      `startup p50 ${q.startup_p50_ms} ms against the pages' ${full.startupMs} and ${failed.startupMs} ms`,
    );
    // Watch time and rebuffering are spans between the SDK's events, stamped on the page's clock as the element's
    // events fire: the page's stalls, less the 250 ms a stall must last to count, and the time the page took to log.
    const watchMs = q.watch_hours * 3_600_000;
    const rebufferMs = (q.rebuffer_rate / 100) * watchMs;
    const stallMs = full.stallMs + failed.stallMs + closed.stallMs;
    t.comment(
      `${player.name} Darshak: watch ${Math.round(watchMs)} ms, rebuffer ${Math.round(rebufferMs)} ms; pages: stalls ${stallMs} ms`,
    );
    t.ok(
      Math.abs(rebufferMs - stallMs) <= 500,
      `rebuffering ${Math.round(rebufferMs)} ms against the three pages' stalls of ${stallMs} ms`,
    );
    const pagesWatchMs = full.watchMs + failed.watchMs + closed.watchMs;
    t.ok(
      watchMs >= pagesWatchMs - 1000,
      `watch time ${Math.round(watchMs)} ms: at least the three pages' ${pagesWatchMs} ms`,
    );
    const top = (await call(base, 'GET', '/v1/analytics/top-content?range=24h', { token })).body as Array<{
      content_id: string;
      title: string | null;
    }>;
    t.match(top[0], { content_id: 'sdk-title', title: 'The SDK title' }, 'the title as the page gave it');
    const concurrency = (await call(base, 'GET', '/v1/analytics/concurrency?range=24h&interval=1', { token }))
      .body as ConcurrencySeries;
    t.equal(concurrency.peak, 3, 'the three pages played at once');
    const devices = (await call(base, 'GET', '/v1/analytics/devices?range=24h', { token })).body as DeviceItem[];
    t.same(
      devices.map((d) => [d.device, d.sessions]),
      [['desktop', 3]],
      "the pages' device, from Chromium's user agent",
    );
  });
}

t.test(
  '30 s without a way to ingest loses nothing: the SDK keeps its events and sends them once it can',
  async (t: Test) => {
    const player = players[0]!;
    const tenant = await makeTenant(svc.config.nats_prefix, 'sdkoffline', 'enterprise');
    const context = await browser.newContext();
    t.teardown(() => context.close());
    const proxy = await ingestProxy(t);
    const sent = proxy.sent;
    const page = await context.newPage();
    const viewer = 'sdkoffline-full';
    const monitor = (ref: string): string =>
      `Darshak.monitor(v, { ingestUrl: ${JSON.stringify(proxy.url)}, apiKey: ${JSON.stringify(tenant.key)}, content: { id: 'offline-title' }, viewer: { anonymous_id: deviceId }, player: ${ref} });`;
    await page.goto(
      media.page(
        viewer,
        pageHtml(player, viewer, player.setup(`${media.url}/m/${viewer}/master.m3u8`, monitor), [
          `${proxy.url}/sdk/v1/darshak.js`,
        ]),
      ),
    );
    const first = await logged(page, 'playing', 0, 20_000);
    // From just after the first frame, past the end of the 20-second stream: every event after play_start is queued.
    proxy.down(30_000);
    await logged(page, 'ended', first.t, 40_000);
    const seenByPage = seen(await log(page), player.stall);
    t.not(
      await eventually(async () => sent.some((s) => s.status === 200 && s.body.includes('"ended"')), 90_000, 250),
      -1,
      'the queue went out after the outage',
    );
    t.ok(proxy.dropped > 0, `${proxy.dropped} attempts met the outage`);
    t.not(await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200), -1);
    const token = await login(base, 'owner@sdkoffline.test');
    const [q] = (await call(base, 'GET', '/v1/analytics/qos?range=24h', { token })).body as QosItem[];
    t.match(q, { sessions_started: 1, startups: 1, fatal_sessions: 0 });
    const watchMs = q!.watch_hours * 3_600_000;
    t.ok(
      Math.abs(watchMs - seenByPage.watchMs) <= 1000,
      `watch time ${Math.round(watchMs)} ms against the page's ${seenByPage.watchMs} ms: every heartbeat arrived`,
    );
    t.same(
      sent.filter((s) => s.method === 'POST' && !/"rejected":0/.test(s.answer)).map((s) => s.answer),
      [],
      'every event accepted',
    );
  },
);

t.test(
  'a plain <video> with a progressive MP4, no player library: the element alone tells the SDK',
  async (t: Test) => {
    const tenant = await makeTenant(svc.config.nats_prefix, 'sdkplain', 'enterprise');
    const context = await browser.newContext();
    t.teardown(() => context.close());
    const proxy = await ingestProxy(t);
    const sent = proxy.sent;
    const plain = { name: 'a plain video element', lib: '' };
    const setup = (src: string): string => `
      Darshak.monitor(v, { ingestUrl: ${JSON.stringify(proxy.url)}, apiKey: ${JSON.stringify(tenant.key)}, content: { id: 'plain-title' }, viewer: { anonymous_id: deviceId } });
      v.src = ${JSON.stringify(src)};
      mark('intent', {});
      await v.play().catch(() => {});`;
    const [full, broken] = await Promise.all(
      ['sdkplain-full', 'sdkplain-broken'].map(async (viewer) => {
        const page = await context.newPage();
        await page.goto(
          media.page(
            viewer,
            pageHtml(
              plain,
              viewer,
              setup(`${media.url}/m/${viewer}/${viewer.endsWith('full') ? 'progressive.mp4' : 'missing.mp4'}`),
              [`${proxy.url}/sdk/v1/darshak.js`],
            ),
          ),
        );
        return page;
      }),
    );
    // Play, stall on a held download, pause, play again, seek, play to the end; the other page's source does not exist.
    await fullPlayback(media, full!, 'sdkplain-full', ['waiting', 'playing']);
    await logged(broken!, 'error', 0, 20_000);
    const page = seen(await log(full!), ['waiting', 'playing']);
    await eventually(
      async () => sent.some((s) => s.body.includes('"ended"')) && sent.some((s) => s.body.includes('"error"')),
      20_000,
      100,
    );
    t.not(await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200), -1);
    t.same(
      sent
        .filter((s) => s.method === 'POST' && (s.status !== 200 || !/"rejected":0/.test(s.answer)))
        .map((s) => s.answer),
      [],
      'every event accepted',
    );
    const events = sent
      .filter((s) => s.method === 'POST')
      .flatMap(
        (s) =>
          (
            JSON.parse(s.body) as {
              events: Array<{
                event_type: string;
                context?: Record<string, string>;
                properties?: Record<string, unknown>;
              }>;
            }
          ).events,
      );
    t.same(
      [...new Set(events.filter((e) => e.event_type !== 'heartbeat').map((e) => e.event_type))].sort(),
      [
        'ended',
        'error',
        'first_frame',
        'pause',
        'play_start',
        'rebuffer_end',
        'rebuffer_start',
        'resume',
        'seek_end',
        'seek_start',
      ].sort(),
    );
    t.match(
      events.find((e) => e.event_type === 'error'),
      { context: { player: 'html5' }, properties: { code: 'MEDIA_ERR_SRC_NOT_SUPPORTED', fatal: true } },
    );
    const token = await login(base, 'owner@sdkplain.test');
    const [q] = (await call(base, 'GET', '/v1/analytics/qos?range=24h', { token })).body as QosItem[];
    t.match(q, { sessions_started: 2, startups: 1, fatal_sessions: 1 });
    t.ok(page.stallMs > 500, 'the held download stalled the element');
    t.ok(
      Math.abs(q!.startup_p50_ms - page.startupMs) <= page.startupMs * 0.05 + 50,
      `startup ${q!.startup_p50_ms} ms against the page's ${page.startupMs} ms`,
    );
    const watchMs = q!.watch_hours * 3_600_000;
    t.ok(
      Math.abs(watchMs - page.watchMs) <= 1000,
      `watch time ${Math.round(watchMs)} ms against the page's ${page.watchMs} ms`,
    );
    const rebufferMs = (q!.rebuffer_rate / 100) * watchMs;
    t.ok(
      Math.abs(rebufferMs - page.stallMs) <= 500,
      `rebuffering ${Math.round(rebufferMs)} ms against the page's stall of ${page.stallMs} ms`,
    );
  },
);

t.test("README's try:web page plays the sample stream with the SDK, and Darshak sees the session", async (t: Test) => {
  const tenant = await makeTenant(svc.config.nats_prefix, 'sdktry', 'enterprise');
  const server = spawn(
    process.execPath,
    [
      `${root}dist/examples/try-web.js`,
      '--key',
      tenant.key,
      '--ingest',
      svc.ingestUrl,
      '--port',
      '0',
      '--seconds',
      '6',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.teardown(() => void server.kill('SIGTERM'));
  const [line] = (await once(createInterface({ input: server.stdout }), 'line')) as [string];
  const url = /http:\/\/\S+\//.exec(line)?.[0];
  t.ok(url, `it says where: ${line}`);
  const context = await browser.newContext();
  t.teardown(() => context.close());
  const page = await context.newPage();
  await page.goto(url!);
  await page.waitForFunction('document.getElementById("v").ended', undefined, { timeout: 30_000 });
  await page.close({ runBeforeUnload: true });
  t.not(await eventually(() => drained(svc.config.nats_prefix, svc.config.shards), 30_000, 200), -1);
  const token = await login(base, 'owner@sdktry.test');
  await eventually(
    async () => ((await call(base, 'GET', '/v1/analytics/qos?range=24h', { token })).body as QosItem[]).length > 0,
    15_000,
    200,
  );
  const [q] = (await call(base, 'GET', '/v1/analytics/qos?range=24h', { token })).body as QosItem[];
  t.match(q, { sessions_started: 1, startups: 1, fatal_sessions: 0 });
  t.ok(q!.watch_hours * 3600 >= 5, `the 6-second stream watched: ${q!.watch_hours * 3600} s`);
  const top = (await call(base, 'GET', '/v1/analytics/top-content?range=24h', { token })).body as Array<{
    content_id: string;
    title: string | null;
    completion_rate: number;
  }>;
  t.match(top[0], { content_id: 'sample-stream', title: 'Darshak sample stream' });
});
