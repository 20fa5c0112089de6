import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { call, login } from '../helpers/api.js';
import { sendScenario } from '../helpers/compare.js';
import {
  cli,
  eventually,
  freePort,
  makeTenant,
  post,
  ready,
  removeNamespace,
  RoleProcesses,
  uniquePrefix,
} from '../helpers/env.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { oneVersionFailing, playback, sendEvents } from '../helpers/traffic.js';
import { makeScenario } from '../helpers/scenario.js';

// The dashboard as a person uses it: real headless Chromium (Debian's, driven by playwright-core) against
// `darshak start` with traffic flowing. With DASHBOARD_SCREENSHOTS=<dir> (npm run screenshots) it keeps a picture of
// each page there.

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(chromiumPath)) {
  // CI installs chromium (.ci/run); elsewhere a missing browser skips rather than fails.
  if (process.env.CI) throw new Error(`no Chromium at ${chromiumPath}: .ci/run installs Debian's chromium`);
  t.plan(0, `no Chromium at ${chromiumPath} (apt-get install chromium, or set CHROMIUM_PATH)`);
  process.exit(0);
}
t.setTimeout(300_000);

const shots = process.env.DASHBOARD_SCREENSHOTS ? resolve(process.env.DASHBOARD_SCREENSHOTS) : null;
if (shots) mkdirSync(shots, { recursive: true });

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-dashboard-'));
const prefix = uniquePrefix();
const [basePort, ingestPort] = [await freePort(), await freePort()];
const base = `http://127.0.0.1:${basePort}`;
const ingestUrl = `http://127.0.0.1:${ingestPort}`;
const procs = new RoleProcesses(
  {
    NATS_PREFIX: prefix,
    DATA_DIR: dataDir,
    BASE_PORT: String(basePort),
    INGEST_PORT: String(ingestPort),
    PUBLIC_BASE_URL: base,
    WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8',
  },
  t,
);
const receiver = await Receiver.start();
let browser: Browser | undefined;
t.teardown(async () => {
  clearInterval(liveTraffic);
  await browser?.close();
  await procs.stopAll('SIGTERM');
  await receiver.close();
  await removeNamespace(prefix);
  rmSync(dataDir, { recursive: true, force: true });
});

procs.start([]);
if (!(await ready(base, 60_000))) throw new Error('darshak start did not become ready');
const tenant = await makeTenant(prefix, 'dash', 'enterprise');
const env = { NATS_PREFIX: prefix };

// History: 30 days of sessions, so every page has numbers. Then live viewers: one more joins every second.
const scenario = makeScenario({ seed: 7, tenants: ['dash'], now: Date.now(), sessionsPerTenant: 60 });
await sendScenario(ingestUrl, scenario, { dash: tenant.key });
let sent = scenario.batches.reduce((n, b) => n + b.events.length, 0);
let watching = 3;
const liveTraffic = setInterval(() => {
  watching = Math.min(watching + 1, 60);
  const now = new Date().toISOString();
  const events = Array.from({ length: watching }, (_, i) => ({
    event_id: randomUUID(),
    event_type: 'heartbeat',
    ts: now,
    session_id: `live-${i}`,
    anonymous_id: `anon-live-${i}`,
    content_id: 'final-live',
    context: { region: i % 2 ? 'Maharashtra' : 'Karnataka', pop: 'bom1', device_type: 'mobile' },
  }));
  sent += events.length;
  void post(`${ingestUrl}/v1/ingest/events`, { events, sent_at: now }, { 'x-api-key': tenant.key }).catch(
    () => undefined,
  );
}, 1000);

browser = await chromium.launch({
  executablePath: chromiumPath,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
const page = await context.newPage();
// Console errors other than the refused requests a test provokes (a CSP violation is one) fail the run.
const consoleErrors: string[] = [];
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) consoleErrors.push(m.text());
});
page.on('pageerror', (e) => consoleErrors.push(e.message));

async function shot(name: string): Promise<void> {
  if (!shots) return;
  await page.waitForTimeout(500);
  // The header is sticky: from the top, a full-page picture shows it once, where it belongs.
  await page.evaluate('window.scrollTo(0, 0)');
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

// Runs in the page (so it is plain JavaScript: this program has no DOM types). A control is named by aria-label,
// aria-labelledby, its <label>, its text or its title.
const unnamedControlsScript = `Array.from(document.querySelectorAll('button, input, select, textarea, a[href], [role=tab], [tabindex="0"]'))
  .filter((el) => {
    const ids = (el.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean);
    const names = [el.getAttribute('aria-label'), ids.map((id) => document.getElementById(id)?.textContent || '').join(''),
      Array.from(el.labels || []).map((l) => l.textContent).join(''), el.textContent, el.getAttribute('title')];
    return !names.some((n) => (n || '').trim() !== '');
  })
  .map((el) => el.outerHTML.slice(0, 120))`;

/** Every control of the page has an accessible name. */
async function unnamedControls(p: Page): Promise<unknown> {
  return p.evaluate(unnamedControlsScript);
}

/** The login form, filled and sent. */
async function signIn(email: string, password = 'correct horse battery'): Promise<void> {
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

const paths: Record<string, string> = {
  Overview: '/',
  Live: '/live',
  'Content & audience': '/content',
  Alerts: '/alerts',
  Admin: '/admin',
};

/** Follow a link of the main navigation: its page shows, and the address is the page's own. */
async function visit(t: Test, link: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link }).click();
  await page.getByRole('heading', { level: 1, name: link }).waitFor();
  t.equal(new URL(page.url()).pathname, paths[link], `${link} has its own address`);
}

t.test('a wrong password shows an error; the right one signs in, on the page asked for', async (t) => {
  await page.goto(`${base}/live`);
  await page.getByRole('heading', { name: 'Darshak' }).waitFor();
  await shot('login');
  await signIn('owner@dash.test', 'wrong password');
  const error = page.getByRole('alert');
  await error.waitFor();
  t.match(await error.textContent(), /E-mail or password is wrong/);
  await shot('login-error');
  await signIn('owner@dash.test');
  await page.getByRole('heading', { level: 1, name: 'Live' }).waitFor();
  t.equal(new URL(page.url()).pathname, '/live');
  t.same(await unnamedControls(page), [], 'every control on Live is named');
});

t.test('the live number moves, every second, over the WebSocket', async (t) => {
  const value = page.getByTestId('live-value');
  const read = async (): Promise<number> => Number((await value.textContent())?.replace(/[^\d]/g, '') || NaN);
  let first = NaN;
  t.ok((await eventually(async () => (first = await read()) > 0, 20_000, 200)) >= 0, `a live value: ${first}`);
  let later = first;
  t.ok(
    (await eventually(async () => (later = await read()) !== first, 15_000, 200)) >= 0,
    `it moved: ${first} → ${later}`,
  );
  t.ok(later > 0);
  await page.getByRole('heading', { name: 'Quality of experience by region' }).waitFor();
  await page.getByRole('list', { name: 'Startup time by region' }).getByText('Maharashtra').first().waitFor();
  await shot('live');
});

t.test(
  "video quality: each device's mean bitrate, within its regions' means, and the renditions' shares",
  async (t) => {
    const token = await login(base, 'owner@dash.test');
    type Item = { device: string; avg_bitrate_kbps: number | null; renditions: Array<{ bucket: string }> };
    const list = page.getByRole('list', { name: 'Mean bitrate by device' });
    const renditions = page.getByRole('list', { name: 'Watch time by rendition' });
    // The page and the API are read together until they agree: the cards reload every 15 s (as the QoS cards do), and
    // the scenario's rows keep arriving, and leaving the 24 hours, meanwhile.
    let findings: Array<[boolean, string]> = [];
    let devices = 0;
    const agree = async (): Promise<boolean> => {
      const items = (await call(base, 'GET', '/v1/analytics/bitrate?range=24h&limit=200', { token }))
        .json as unknown as Item[];
      const shown = new Map<string, number>();
      for (const row of await list.getByRole('listitem').all())
        shown.set(
          (await row.locator('.bar-name').textContent()) ?? '',
          Number((await row.locator('.bar-value').textContent())?.replace(/[^\d]/g, '')),
        );
      const known = new Set(items.filter((i) => i.avg_bitrate_kbps !== null).map((i) => i.device));
      devices = known.size;
      findings = [...known].map((device) => {
        const means = items
          .filter((i) => i.device === device && i.avg_bitrate_kbps !== null)
          .map((i) => i.avg_bitrate_kbps!);
        const [low, high] = [Math.floor(Math.min(...means)), Math.ceil(Math.max(...means))];
        const kbps = shown.get(device);
        // A mean weighted by watch time lies within its parts' means (rounded to the kbps shown).
        return [kbps !== undefined && kbps >= low && kbps <= high, `${device}: ${kbps} kbps, within ${low}–${high}`];
      });
      const buckets = new Set(items.flatMap((i) => i.renditions.map((r) => r.bucket)));
      const bars = new Set(await renditions.locator('.bar-name').allTextContents());
      findings.push([
        bars.size === buckets.size && [...buckets].every((b) => bars.has(b === 'unknown' ? b : `${b} kbps`)),
        `a bar per rendition bucket the API has: ${[...bars].join(', ')}`,
      ]);
      return findings.every(([ok]) => ok) && shown.size === known.size;
    };
    await eventually(agree, 45_000, 1000);
    t.ok(devices > 1, `the scenario has bitrates of ${devices} devices`);
    for (const [ok, what] of findings) t.ok(ok, what);
    let total = 0;
    for (const v of await renditions.locator('.bar-value').allTextContents()) total += Number(v.replace(/[^\d.]/g, ''));
    t.ok(Math.abs(total - 100) < 0.5, `the shares add up to 100 % (${total})`);
  },
);

t.test("overview: the KPI tiles are the API's numbers, for the range picked", async (t) => {
  await visit(t, 'Overview');
  const token = await login(base, 'owner@dash.test');
  const mau = async (): Promise<number> =>
    ((await call(base, 'GET', '/v1/analytics/overview?range=30d', { token })).json as { monthly_active_users: number })
      .monthly_active_users;
  // A live viewer joins every second, so the month's count grows while the page asks for it: the tile must show, in
  // Indian digit grouping, a count the API gave between a read just before the click and the moment the tile is read.
  const before = await mau();
  await page.getByText('30 days').click();
  const tile = page.getByTestId('tile-Monthly active users');
  let shown = '';
  const fromApi = async (): Promise<boolean> => {
    shown = (await tile.textContent()) ?? '';
    const n = Number(shown.replace(/,/g, ''));
    return n >= before && shown === n.toLocaleString('en-IN') && n <= (await mau());
  };
  t.ok((await eventually(fromApi, 10_000, 100)) >= 0, `MAU ${shown}, the API's ${before} or more`);
  t.same(await unnamedControls(page), []);
  await shot('overview');
});

t.test('content & audience: top content, devices and the India map with its tooltips', async (t) => {
  await visit(t, 'Content & audience');
  const token = await login(base, 'owner@dash.test');
  const top = (await call(base, 'GET', '/v1/analytics/top-content?limit=1', { token })).json as unknown as Array<{
    title: string;
    content_id: string;
  }>;
  await page
    .getByRole('region', { name: 'Top content by watch hours' })
    .getByText(top[0]!.title || top[0]!.content_id)
    .first()
    .waitFor();
  const maharashtra = page.locator('path[data-state="Maharashtra"]');
  await maharashtra.hover();
  t.match(await page.getByTestId('map-tooltip').textContent(), /^Maharashtra: [\d.,]+ watch hours, [\d,]+ viewers/);
  t.notMatch(await maharashtra.getAttribute('class'), /shade-0/, 'a state with viewers is coloured');
  await page.getByRole('list', { name: 'Share of sessions by device' }).getByText('mobile').waitFor();
  t.same(await unnamedControls(page), []);
  await shot('content');
});

t.test('API keys: create (shown once, copyable, works at ingest), then revoke', async (t) => {
  await visit(t, 'Admin');
  await page.getByRole('tab', { name: 'API keys' }).click();
  await page.getByLabel('Name').fill('Dashboard test key');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secret = page.getByTestId('secret');
  await secret.waitFor();
  const key = await secret.inputValue();
  t.match(key, /^dk_live_/);
  await page.getByRole('button', { name: /^Copy api key/i }).click();
  t.equal(await page.evaluate('navigator.clipboard.readText()'), key, 'the copy button copies the key');
  const accepted = await post(
    `${ingestUrl}/v1/ingest/events`,
    { events: [{ event_type: 'app_open', anonymous_id: 'a', ts: new Date().toISOString() }] },
    { 'x-api-key': key },
  );
  t.equal(accepted.status, 200, 'the new key is accepted at ingest');
  await shot('admin-keys');
  const row = page.getByRole('row').filter({ hasText: 'Dashboard test key' });
  await row.getByRole('button', { name: 'Revoke' }).click();
  await row.getByRole('button', { name: 'Revoke Dashboard test key' }).click();
  await row.getByText(/^revoked/).waitFor();
  t.ok(
    (await eventually(
      async () =>
        (
          await post(
            `${ingestUrl}/v1/ingest/events`,
            { events: [{ event_type: 'app_open', anonymous_id: 'a', ts: new Date().toISOString() }] },
            { 'x-api-key': key },
          )
        ).status === 401,
      5000,
      100,
    )) >= 0,
    'ingest refuses it once revoked',
  );
  t.same(await unnamedControls(page), []);
});

t.test('webhooks: create to a local receiver, test ping, see the delivery log, replay it', async (t) => {
  await page.getByRole('tab', { name: 'Webhooks' }).click();
  await page.getByLabel('URL').fill(`${receiver.url}/dash`);
  await page.getByLabel('Description').fill('On-call receiver');
  await page.getByLabel('ingest.quota_80pct').check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  t.match(await page.getByTestId('secret').inputValue(), /^whsec_/);
  await page.getByRole('button', { name: `Send a test ping to ${receiver.url}/dash` }).click();
  const pings = () =>
    receiver.received.filter(
      (r) => r.path === '/dash' && (JSON.parse(r.body) as { type: string }).type === 'test.ping',
    );
  t.ok((await eventually(async () => pings().length === 1, 15_000, 100)) >= 0, 'the receiver got the ping');
  await page.getByRole('button', { name: `Deliveries of ${receiver.url}/dash` }).click();
  const log = page.getByRole('region', { name: `Last 200 delivery attempts to ${receiver.url}/dash` });
  const attempt = log.getByRole('row').filter({ hasText: 'test.ping' }).first();
  await attempt.getByText('succeeded').waitFor({ timeout: 15_000 });
  t.match(await attempt.textContent(), /200/, 'its response code');
  t.match(await attempt.textContent(), /\d+ ms/, 'and latency');
  await attempt.getByText('Show').click();
  t.match(await attempt.locator('pre').textContent(), /"type": "test.ping"/, 'the request body');
  await shot('admin-webhooks');
  await attempt.getByRole('button', { name: /^Replay test.ping/ }).click();
  await page.getByText(/Replay of dlv_[0-9a-f]+ queued/).waitFor();
  t.ok((await eventually(async () => pings().length === 2, 15_000, 100)) >= 0, 'the replay arrived');
  const [one, two] = pings();
  t.equal(two!.headers['x-service-delivery'], one!.headers['x-service-delivery'], 'the same delivery id');
  t.equal(two!.body, one!.body, 'the same body');
  t.same(await unnamedControls(page), []);
});

t.test('service accounts and exports', async (t) => {
  await page.getByRole('tab', { name: 'Service accounts' }).click();
  await page.getByLabel('Name').fill('Nightly report');
  await page.getByRole('button', { name: 'Create service account' }).click();
  const token = await page.getByTestId('secret').inputValue();
  t.equal((await call(base, 'GET', '/v1/analytics/devices', { token })).status, 200, 'its token reads analytics');
  await page.getByRole('row').filter({ hasText: 'Nightly report' }).waitFor();
  await shot('admin-service-accounts');
  await page.getByRole('tab', { name: 'Exports' }).click();
  await page.getByRole('button', { name: 'Request export' }).click();
  const link = page.getByRole('link', { name: 'Download Parquet' });
  await link.waitFor({ timeout: 60_000 });
  const file = await fetch(new URL((await link.getAttribute('href'))!, base));
  t.equal(file.status, 200, 'the download link serves the file');
  t.equal(
    Buffer.from(await file.arrayBuffer())
      .subarray(0, 4)
      .toString(),
    'PAR1',
    'a Parquet file',
  );
  t.same(await unnamedControls(page), []);
  await shot('admin-exports');
});

t.test('alerts: a new alert appears without reload, and is acknowledged', async (t) => {
  await visit(t, 'Alerts');
  await page.getByText('No alerts match these filters.').waitFor();
  // A real alert: the tenant's monthly quota set just under what it has sent, so the alerts role sees 80 % used.
  const quota = Math.floor(sent / 0.85);
  t.equal((await cli(['tenant', 'update', '--slug', 'dash', '--monthly-quota', String(quota)], env)).code, 0);
  const item = page.locator('li.alert').filter({ hasText: 'quota' }).first();
  await item.waitFor({ timeout: 30_000 });
  await page.getByText(/^New alert:/).waitFor();
  await shot('alerts');
  await item.getByRole('button', { name: /^Acknowledge/ }).click();
  await item.getByText(/^acknowledged /).waitFor();
  const token = await login(base, 'owner@dash.test');
  const stored = (await call(base, 'GET', '/v1/analytics/alerts?acknowledged=true', { token }))
    .json as unknown as Array<{ category: string }>;
  t.ok(
    stored.some((a) => a.category.startsWith('ingest.quota')),
    'the API has it acknowledged',
  );
  t.ok(
    receiver.received.some((r) => (JSON.parse(r.body) as { type: string }).type === 'ingest.quota_80pct'),
    'and the webhook made in the dashboard delivered it',
  );
  t.same(await unnamedControls(page), []);
});

t.test('usable at 360 px: nothing wider than the screen', async (t) => {
  await page.setViewportSize({ width: 360, height: 780 });
  for (const link of ['Live', 'Content & audience', 'Admin']) {
    await visit(t, link);
    await page.waitForTimeout(300);
    const width = Number(await page.evaluate('document.documentElement.scrollWidth'));
    t.ok(width <= 360, `${link}: ${width} px wide`);
    if (link === 'Live') await shot('live-360');
  }
  await page.setViewportSize({ width: 1280, height: 900 });
});

t.test('sign out: back to the login page, and the token was never stored in the browser', async (t) => {
  const stored = await page.evaluate('({ local: localStorage.length, session: sessionStorage.length })');
  t.same(stored, { local: 0, session: 0 });
  t.same(await context.cookies(), []);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  await page.reload();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  t.pass('a reload does not sign back in');
  t.same(consoleErrors, [], 'no script or Content-Security-Policy errors in the console');
});

t.test('the role decides: an admin manages keys and acknowledges, a viewer only reads and exports', async (t) => {
  // An alert left open: the quota now used up, so the alerts role raises ingest.quota_exceeded.
  t.equal(
    (await cli(['tenant', 'update', '--slug', 'dash', '--monthly-quota', String(Math.floor(sent / 2))], env)).code,
    0,
  );
  const owner = await login(base, 'owner@dash.test');
  const open = async (): Promise<boolean> =>
    (
      (await call(base, 'GET', '/v1/analytics/alerts?acknowledged=false', { token: owner }))
        .json as unknown as unknown[]
    ).length > 0;
  t.ok((await eventually(open, 30_000, 250)) >= 0, 'an open alert');
  for (const [role, tabs, acknowledge] of [
    ['viewer', ['Exports'], 0],
    ['admin', ['API keys', 'Exports'], 1],
  ] as const) {
    t.equal(
      (
        await cli(
          [
            'user',
            'add',
            '--tenant',
            'dash',
            '--email',
            `${role}@dash.test`,
            '--password',
            'correct horse battery',
            '--role',
            role,
          ],
          env,
        )
      ).code,
      0,
    );
    await page.goto(`${base}/admin`);
    await signIn(`${role}@dash.test`);
    await page.getByRole('heading', { level: 1, name: 'Admin' }).waitFor();
    t.same(await page.getByRole('tab').allTextContents(), tabs, `${role}: ${tabs.join(', ')}`);
    await visit(t, 'Alerts');
    await page.locator('li.alert').filter({ hasText: 'ingest.quota_exceeded' }).waitFor();
    t.equal(
      await page.getByRole('button', { name: /^Acknowledge/ }).count(),
      acknowledge,
      `${role}: ${acknowledge ? 'may' : 'may not'} acknowledge`,
    );
    await page.getByRole('button', { name: 'Sign out' }).click();
  }
  t.same(consoleErrors, [], 'still no console errors');
});

t.test('an alert card names the cohort behind a QoS alert and charts its metric around the start', async (t) => {
  // Another tenant, so the numbers the tests above compare stay the scenario's: 40 quiet minutes, then one app
  // version of one region failing.
  const cause = await makeTenant(prefix, 'cause', 'pro');
  // Ending on a minute's start, as in test/alerts/detection.test.ts: where the failure's first minute falls in its
  // clock minute decides which minute first holds the sample, and with it whether the region's condition or the
  // version's own is the first to cross (both name the version; the title differs).
  const now = Math.floor(Date.now() / 60_000) * 60_000;
  const events = playback(oneVersionFailing('cause', now), now - 45 * 60_000, now);
  t.equal(await sendEvents(ingestUrl, cause.key, events), events.length);
  await page.goto(`${base}/alerts`);
  await signIn('owner@cause.test');
  const card = page
    .locator('li.alert')
    .filter({ hasText: 'Playback error spike in Maharashtra, mostly app version 5.13.0' });
  await card.waitFor({ timeout: 60_000 });
  t.match(
    await card.locator('.alert-cohort').textContent(),
    /Cohort app version 5\.13\.0: \d+ % of it, [\d.]+ % against [\d.]+ % before/,
  );
  await card.locator('.alert-facts .chart canvas').first().waitFor();
  t.match(
    await card.locator('.alert-facts .chart').getAttribute('aria-label'),
    /^The metric per minute \(%\) up to the alert, from /,
  );
  await shot('alert-cohort');
  t.same(consoleErrors, [], 'no console errors');
});
