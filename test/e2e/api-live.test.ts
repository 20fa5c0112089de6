import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import t from 'tap';
import WebSocket from 'ws';
import { busNames } from '../../src/bus/names.js';
import { call, login } from '../helpers/api.js';
import { makeTenant, natsUrl, post, startService } from '../helpers/env.js';
import { validateComponent } from '../helpers/openapi.js';
import { engineTest } from '../helpers/engines.js';

// GET /v1/live with HTTP_ENGINE uws and node (the api listener serves WebSockets on node:http either way, see
// selectEngine): concurrency every second, alerts as they fire, tenants apart, tokens checked at the upgrade and
// every second after.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-api-live-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

interface Feed {
  ws: WebSocket;
  /** X-Request-Id of the 101 answer. */
  requestId: string;
  messages: Array<Record<string, unknown>>;
  closed: Promise<{ code: number; reason: string }>;
  next(match: (m: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
}

function open(url: string, protocols?: string[]): Promise<Feed> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    let requestId: string | undefined;
    ws.on('upgrade', (res) => (requestId = String(res.headers['x-request-id'])));
    const messages: Array<Record<string, unknown>> = [];
    const waiters: Array<() => void> = [];
    ws.on('message', (data) => {
      messages.push(JSON.parse((data as Buffer).toString()) as Record<string, unknown>);
      for (const w of waiters.splice(0)) w();
    });
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on('close', (code, reason) => r({ code, reason: String(reason) })),
    );
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () =>
        reject(
          Object.assign(new Error(`refused ${res.statusCode}`), {
            status: res.statusCode,
            body: JSON.parse(body) as unknown,
          }),
        ),
      );
    });
    ws.on('error', reject);
    ws.on('open', () =>
      resolve({
        ws,
        requestId: requestId ?? '',
        messages,
        closed,
        async next(match, ms = 20_000) {
          const deadline = Date.now() + ms;
          let seen = 0;
          for (;;) {
            const found = messages.slice(seen).find(match);
            if (found) return found;
            seen = messages.length;
            const left = deadline - Date.now();
            if (left <= 0)
              throw new Error(`no matching message in ${ms} ms; got ${JSON.stringify(messages.slice(-3))}`);
            await new Promise<void>((r) => {
              waiters.push(r);
              setTimeout(r, left);
            });
          }
        },
      }),
    );
  });
}

for (const engine of ['uws', 'node'] as const) {
  t.test(`live feed on ${engine}`, engineTest(engine), async (t) => {
    const svc = await startService({ data_dir: dataDir, http_engine: engine }, 'all');
    t.teardown(() => svc.stop());
    const basePort = svc.started.services.listeners.get('base')!;
    t.equal(svc.started.services.listeners.get('ingest')!.engine, engine, `ingest runs on ${engine}`);
    t.equal(
      basePort.engine,
      'node',
      'the api listener, which serves WebSockets, runs on node:http and ws whatever HTTP_ENGINE says',
    );
    const base = `http://127.0.0.1:${basePort.port}`;
    const wsBase = `ws://127.0.0.1:${basePort.port}`;
    const prefix = svc.config.nats_prefix;
    // The engines' runs share one store (and the second's raw stream restarts at sequence 1, whose flush tokens must
    // not collide with the first's): slugs of their own keep the first run's viewers out of the second.
    const slug = `acme-${engine}`;
    const acme = await makeTenant(prefix, slug, 'pro');
    await makeTenant(prefix, `other-${engine}`, 'pro');
    const token = await login(base, `owner@${slug}.test`);
    const otherToken = await login(base, `owner@other-${engine}.test`);

    const feed = await open(`${wsBase}/v1/live?token=${token}`);
    t.match(feed.requestId, /^[0-9a-f-]{36}$/, 'the 101 answer carries X-Request-Id');
    const first = await feed.next((m) => m.type === 'concurrency');
    t.same(validateComponent('LiveConcurrencyMessage', first), [], 'concurrency message matches the document');
    t.equal(first.value, 0, 'nobody watching yet');
    const lag = Date.now() - Date.parse(String(first.ts));
    t.ok(lag >= 1000 && lag < 5000, `the pushed second is about 2 s behind (${lag} ms)`);

    // Three viewers start playing now: the feed shows them within seconds.
    const now = Date.now();
    const events = [1, 2, 3].flatMap((i) => [
      {
        event_type: 'play_start',
        ts: new Date(now - 2000).toISOString(),
        session_id: `live-${i}`,
        anonymous_id: `v${i}`,
        content_id: 'final',
      },
      { event_type: 'first_frame', ts: new Date(now - 1500).toISOString(), session_id: `live-${i}` },
    ]);
    const sent = await post(`${svc.ingestUrl}/v1/ingest/events`, { events }, { 'x-api-key': acme.key });
    t.equal(sent.status, 200);
    const watching = await feed.next((m) => m.type === 'concurrency' && m.value === 3, 30_000);
    t.ok(watching, 'three concurrent viewers pushed');

    const viaProtocol = await open(`${wsBase}/v1/live`, ['darshak.v1', otherToken]);
    t.equal(viaProtocol.ws.protocol, 'darshak.v1', 'the token offered as a subprotocol; darshak.v1 selected');
    const otherFirst = await viaProtocol.next((m) => m.type === 'concurrency');
    t.equal(otherFirst.value, 0, "another tenant's feed shows none of acme's viewers");

    const nc = await connect({ servers: natsUrl });
    t.teardown(() => nc.close());
    const alert = {
      id: 7,
      severity: 'critical',
      source: 'qos',
      category: 'qos.rebuffer_spike',
      title: 'Rebuffering spike in Maharashtra',
      description: 'x',
      data: {},
      acknowledged: false,
      acknowledged_at: null,
      created_at: new Date().toISOString(),
      resolved_at: null,
    };
    nc.publish(busNames(prefix).alertsLiveSubject(slug), JSON.stringify(alert));
    // The running alerts role pushes real ones too (the titles played above are new releases): look for this one.
    const pushed = await feed.next((m) => m.type === 'alert' && m.id === 7);
    t.match(pushed, { type: 'alert', id: 7, title: alert.title });
    t.same(validateComponent('LiveAlertMessage', pushed), [], 'alert message matches the document');
    await new Promise((r) => setTimeout(r, 1200));
    t.notOk(
      viaProtocol.messages.some((m) => m.type === 'alert' && m.id === 7),
      "the other tenant's feed gets no acme alert",
    );

    for (const [name, url, protocols, status] of [
      ['no token', `${wsBase}/v1/live`, undefined, 401],
      ['a bad token', `${wsBase}/v1/live?token=${token.slice(0, -4)}AAAA`, undefined, 401],
    ] as const) {
      const refused = await open(url, protocols).then(
        () => null,
        (err: { status?: number; body?: unknown }) => err,
      );
      t.equal(refused?.status, status, name);
      t.match(refused?.body, { error: { code: 'unauthorized' } }, name);
    }
    const plain = await call(base, 'GET', '/v1/live', { token });
    t.equal(plain.status, 400, 'a plain GET is told to upgrade');

    // A service account's socket closes with 4001 when it is revoked.
    const sa = await call(base, 'POST', '/v1/service-accounts', {
      token,
      body: { name: 'wallboard', scopes: ['analytics:read'] },
    });
    const saFeed = await open(`${wsBase}/v1/live?token=${String(sa.json.token)}`);
    await saFeed.next((m) => m.type === 'concurrency');
    const keysOnly = await call(base, 'POST', '/v1/service-accounts', {
      token,
      body: { name: 'keys', scopes: ['keys:manage'] },
    });
    const forbidden = await open(`${wsBase}/v1/live?token=${String(keysOnly.json.token)}`).then(
      () => null,
      (err: { status?: number }) => err,
    );
    t.equal(forbidden?.status, 403, 'a token without analytics:read is refused');
    await call(base, 'DELETE', `/v1/service-accounts/${String(sa.json.id)}`, { token });
    const closed = await Promise.race([saFeed.closed, new Promise<null>((r) => setTimeout(() => r(null), 4000))]);
    t.equal(closed?.code, 4001, 'revoked: closed with 4001');

    // At most 5 live connections per token: the feed above is one; a sixth is refused; closing one makes room.
    const more = [
      await open(`${wsBase}/v1/live?token=${token}`),
      await open(`${wsBase}/v1/live?token=${token}`),
      await open(`${wsBase}/v1/live?token=${token}`),
      await open(`${wsBase}/v1/live?token=${token}`),
    ];
    const sixth = await open(`${wsBase}/v1/live?token=${token}`).then(
      () => null,
      (err: { status?: number; body?: unknown }) => err,
    );
    t.equal(sixth?.status, 429, 'a sixth connection with one token is refused');
    t.match(sixth?.body, { error: { code: 'rate_limited', message: /At most 5 live connections per token/ } });
    t.ok(await open(`${wsBase}/v1/live`, ['darshak.v1', otherToken]), 'another token is not affected');
    more[0]!.ws.close();
    await more[0]!.closed;
    const again = await open(`${wsBase}/v1/live?token=${token}`);
    t.ok(again, 'once one closes, another may open');
    for (const f of [...more.slice(1), again]) f.ws.close();

    feed.ws.close();
    viaProtocol.ws.close();
  });
}
