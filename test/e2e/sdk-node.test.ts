import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { Tracker } from '../../sdk/web/src/tracker.js';
import { Transport } from '../../sdk/web/src/transport.js';
import { integrityOf, sdkScriptPath } from '../../src/ingest/sdk-script.js';
import { call, login } from '../helpers/api.js';
import { eventually, makeTenant, startService } from '../helpers/env.js';

// The SDK's state machine and transport (its two parts without a DOM) against a running service: a scripted session
// on a test clock, sent as the SDK sends it, comes out of the analytics API as the page saw it. The browser tests with
// real players drive the same parts through `monitor`. Also: ingest serves the script-tag build within its budget.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-sdk-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const svc = await startService({ data_dir: dataDir }, 'all');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;

t.test('a session sent by the SDK: startup, a rebuffer and watch time as the page saw them', async (t) => {
  const tenant = await makeTenant(svc.config.nats_prefix, 'sdk', 'pro');
  const owner = await login(base, 'owner@sdk.test');
  // The page's clock starts 20 minutes ago and runs as fast as the test; everything is sent at its end, so the server
  // reads one clock skew from `sent_at` and moves the whole session by it, keeping its durations.
  let now = Date.now() - 20 * 60_000;
  let position = 0;
  let n = 0;
  const errors: string[] = [];
  const transport = new Transport({
    ingestUrl: svc.ingestUrl,
    apiKey: tenant.key,
    fetch,
    newId: () => crypto.randomUUID(),
    now: () => now,
    random: Math.random,
    onError: (m) => errors.push(m),
  });
  const tracker = new Tracker({
    viewer: { anonymous_id: 'anon-sdk-1' },
    content: { id: 'sdk-title', title: 'An SDK title', type: 'movie', duration_sec: 600 },
    context: { player: 'html5', region: 'Goa', country: 'IN', device_type: 'desktop' },
    newId: () => `sdk-session-${++n}`,
    now: () => now,
    position: () => position,
    emit: (e) => transport.add(e),
  });
  const wait = (ms: number, playing: boolean): void => {
    for (let left = ms; left > 0; left -= 1000) {
      now += Math.min(1000, left);
      if (playing) position += Math.min(1000, left) / 1000;
      tracker.tick();
    }
  };
  tracker.play();
  wait(1200, false);
  tracker.playing();
  wait(60_000, true);
  tracker.waiting();
  wait(6_000, false);
  tracker.playing();
  wait(54_000, true);
  tracker.ended();
  for (let i = 0; i < 10 && transport.pending > 0; i++) await transport.flush();
  t.equal(transport.pending, 0, 'everything sent');
  t.same(errors, []);

  const qos = async (): Promise<Record<string, number> | undefined> =>
    (
      (await call(base, 'GET', '/v1/analytics/qos?range=24h', { token: owner })).body as Array<
        Record<string, number> & { region: string }
      >
    ).find((q) => (q.region as unknown) === 'Goa');
  // Stored a little after the last batch: wait for the whole session's watch time.
  t.not(await eventually(async () => ((await qos())?.watch_hours ?? 0) * 3600 >= 119, 30_000, 250), -1);
  const q = (await qos())!;
  t.ok(
    Math.abs(q.startup_p50_ms! - 1200) <= 1200 * 0.05,
    `startup ${q.startup_p50_ms} ms: 1,200 within the histogram's 5 %`,
  );
  // Watch time counts playing and rebuffering (docs/metrics.md): 114 s playing and 6 s stalled.
  t.ok(Math.abs(q.rebuffer_rate! - (6 / 120) * 100) < 0.1, `rebuffer rate ${q.rebuffer_rate} %: 6 s of 120`);
  t.equal(q.sessions_started, 1);
  t.equal(q.fatal_sessions, 0);
});

t.test('ingest serves the script-tag build: cached, any origin, its integrity hash, within 6 kB gzipped', async (t) => {
  t.ok(sdkScriptPath, 'npm run build made sdk/web/dist/darshak.js');
  const bytes = readFileSync(sdkScriptPath!);
  t.ok(gzipSync(bytes, { level: 9 }).length <= 6 * 1024, `${gzipSync(bytes, { level: 9 }).length} bytes gzipped`);
  const r = await fetch(`${svc.ingestUrl}/sdk/v1/darshak.js`, { headers: { origin: 'https://player.example' } });
  t.equal(r.status, 200);
  t.equal(r.headers.get('access-control-allow-origin'), '*');
  t.match(r.headers.get('content-type'), /^text\/javascript/);
  t.match(r.headers.get('cache-control'), /max-age=86400/);
  t.equal(r.headers.get('x-darshak-integrity'), integrityOf(bytes));
  const body = Buffer.from(await r.arrayBuffer());
  t.ok(body.equals(bytes));
  t.match(body.toString(), /Darshak/, 'it defines window.Darshak');
  const again = await fetch(`${svc.ingestUrl}/sdk/v1/darshak.js`, {
    headers: { 'if-none-match': r.headers.get('etag')! },
  });
  t.equal(again.status, 304);
});
