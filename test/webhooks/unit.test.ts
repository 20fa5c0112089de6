import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { verify } from '@octokit/webhooks-methods';
import { deliveryId } from '../../src/contracts/webhook-events.js';
import { Mailer } from '../../src/webhooks/mailer.js';
import { maxAttempts, parseRetryAfter, retryDelayMs, retryStepsMs } from '../../src/webhooks/schedule.js';
import { postOnce } from '../../src/webhooks/send.js';
import { Webhook } from 'standardwebhooks';
import { newSecret } from '../../src/control/webhook-store.js';
import { deliveryHeaders, signature } from '../../src/webhooks/sign.js';
import { slackMessage, SlackPacer } from '../../src/webhooks/slack.js';
import { AddressGuard, unmapIpv4 } from '../../src/http/ssrf.js';
import { Receiver } from '../../bench/webhook-receiver.js';
import { internalAddresses, internalHosts } from '../helpers/internal-addresses.js';

t.test(
  "the schedule: the seed's steps, jitter only adds and stays under 10 %, Retry-After up to twice the step",
  async (t) => {
    t.same(retryStepsMs, [30_000, 120_000, 600_000, 3_600_000, 21_600_000, 86_400_000]);
    t.equal(maxAttempts, 7);
    for (let attempt = 1; attempt <= 6; attempt++) {
      const step = retryStepsMs[attempt - 1]!;
      t.equal(
        retryDelayMs(attempt, null, () => 0),
        step,
        'no jitter drawn: exactly the step',
      );
      const late = retryDelayMs(attempt, null, () => 0.99999999)!;
      t.ok(late >= step && late < step * 1.1, `attempt ${attempt}: at most 10 % late`);
      t.equal(
        retryDelayMs(attempt, step * 5, () => 0),
        2 * step,
        'Retry-After capped at twice the step',
      );
      t.equal(
        retryDelayMs(attempt, step / 2, () => 0),
        step,
        'a Retry-After shorter than the step does not make it early',
      );
      t.equal(
        retryDelayMs(attempt, step * 1.5, () => 0),
        step * 1.5,
        'in between: as asked',
      );
    }
    t.equal(retryDelayMs(7, null), null, 'nothing after the seventh attempt');
    for (let i = 0; i < 1000; i++) {
      const d = retryDelayMs(1, null)!;
      if (d < 30_000 || d > 33_000) t.fail(`jitter out of bounds: ${d}`);
    }
    t.equal(parseRetryAfter('120', 0), 120_000);
    t.equal(parseRetryAfter(new Date(90_000).toUTCString(), 30_000), 60_000, 'an HTTP date');
    t.equal(parseRetryAfter('soon', 0), null);
    t.equal(parseRetryAfter(null, 0), null);
  },
);

t.test("signatures: the seed's form, checked by an independent verifier; both during a rotation", async (t) => {
  const body = JSON.stringify({
    id: 'evt_1',
    type: 'qos.error_spike',
    created_at: '2026-11-21T10:00:00Z',
    tenant_slug: 'acme',
    data: { severity: 'warning' },
  });
  const sig = signature('whsec_a', body);
  t.match(sig, /^sha256=[0-9a-f]{64}$/);
  t.ok(await verify('whsec_a', body, sig));
  t.notOk(await verify('whsec_a', body.replace('warning', 'warninh'), sig), 'one changed byte');
  t.notOk(await verify('whsec_b', body, sig), 'another secret');
  const now = Date.parse('2026-11-21T10:00:00Z');
  const rotating = {
    secret: 'whsec_new',
    previous_secret: 'whsec_old',
    previous_secret_until: new Date(now + 1000).toISOString(),
  };
  const h = deliveryHeaders(rotating, 'dlv_x', body, now);
  t.ok(await verify('whsec_new', body, h['X-Service-Signature']!));
  t.ok(await verify('whsec_old', body, h['X-Service-Signature-Previous']!));
  t.equal(h['X-Service-Timestamp'], String(now / 1000));
  t.equal(
    deliveryHeaders(rotating, 'dlv_x', body, now + 1000)['X-Service-Signature-Previous'],
    undefined,
    'not after the 24 h',
  );
  t.equal(deliveryId('evt_1', 'wh_a'), deliveryId('evt_1', 'wh_a'), 'the delivery id is stable');
});

t.test(
  'the timestamped signature: Standard Webhooks, checked by the standardwebhooks package; stale and replayed deliveries refused',
  async (t) => {
    const secret = newSecret();
    t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, "a secret in Standard Webhooks' form");
    const body = JSON.stringify({
      id: 'evt_1',
      type: 'qos.error_spike',
      created_at: '2026-11-21T10:00:00Z',
      tenant_slug: 'acme',
      data: { severity: 'warning' },
    });
    const now = Date.now();
    const h = deliveryHeaders({ secret, previous_secret: null, previous_secret_until: null }, 'dlv_x', body, now);
    t.equal(h['webhook-id'], 'dlv_x');
    t.equal(h['webhook-timestamp'], String(Math.floor(now / 1000)));
    t.same(new Webhook(secret).verify(body, h), JSON.parse(body), 'verified');
    t.throws(
      () => new Webhook(secret).verify(body.replace('warning', 'warninh'), h),
      /No matching signature/,
      'one changed byte',
    );
    t.throws(() => new Webhook(newSecret()).verify(body, h), /No matching signature/, 'another secret');
    const old = deliveryHeaders(
      { secret, previous_secret: null, previous_secret_until: null },
      'dlv_x',
      body,
      now - 10 * 60_000,
    );
    t.throws(() => new Webhook(secret).verify(body, old), /too old/, 'a delivery signed 10 minutes ago is refused');
    t.throws(
      () => new Webhook(secret).verify(body, { ...old, 'webhook-timestamp': h['webhook-timestamp']! }),
      /No matching signature/,
      'its timestamp cannot be moved: it is signed',
    );
    const previous = newSecret();
    const rotating = deliveryHeaders(
      { secret, previous_secret: previous, previous_secret_until: new Date(now + 60_000).toISOString() },
      'dlv_x',
      body,
      now,
    );
    t.equal(rotating['webhook-signature']!.split(' ').length, 2, 'two signatures during a rotation');
    t.ok(
      new Webhook(secret).verify(body, rotating) && new Webhook(previous).verify(body, rotating),
      'either secret verifies',
    );
    t.not(deliveryId('evt_1', 'wh_a'), deliveryId('evt_1', 'wh_b'));
  },
);

t.test(
  'the SSRF guard refuses private, loopback, link-local, CGNAT, multicast, unique-local and mapped addresses',
  async (t) => {
    const guard = new AddressGuard([]);
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '172.16.3.4',
      '192.168.1.1',
      '224.0.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fc00::1',
      'fd12::1',
      'fe80::1',
      'ff02::1',
      '::ffff:10.0.0.1',
      '::ffff:a00:1',
      '::ffff:127.0.0.1',
    ]) {
      t.not(guard.refusal(a), null, `${a} refused`);
    }
    // IPv6 forms that carry an IPv4 address are judged by it; everything outside global unicast (2000::/3) is refused.
    for (const a of [
      '::7f00:1', // IPv4-compatible 127.0.0.1
      '::127.0.0.1',
      '::ffff:0:a00:1', // IPv4-translated 10.0.0.1
      '2002:7f00:1::1', // 6to4 of 127.0.0.1
      '2002:a9fe:a9fe::', // 6to4 of 169.254.169.254
      '64:ff9b::a00:1', // NAT64 of 10.0.0.1
      '64:ff9b:1::1', // local-use NAT64
      'fec0::1', // site-local
      '2001:db8::1', // documentation
      '2001::1', // Teredo
      '100::1', // discard-only
      '4000::1', // not yet allocated
    ]) {
      t.not(guard.refusal(a), null, `${a} refused`);
    }
    for (const a of [
      '8.8.8.8',
      '1.1.1.1',
      '2606:4700:4700::1111',
      '::ffff:8.8.8.8',
      '100.128.0.1',
      '2002:808:808::1',
      '64:ff9b::808:808',
      '2a00:1450:4001:82a::200e',
    ]) {
      t.equal(guard.refusal(a), null, `${a} allowed`);
    }
    t.equal(unmapIpv4('::ffff:a00:1'), '10.0.0.1');
    const local = await guard.resolve('localhost');
    t.notOk(local.ok, 'a name that resolves to loopback is refused');
    t.notOk((await guard.resolve('[::1]')).ok);
    const exempt = new AddressGuard(['127.0.0.0/8', 'internal.example']);
    t.equal(exempt.refusal('127.0.0.1'), null, 'WEBHOOK_ALLOW_HOSTS exempts a CIDR');
    t.not(exempt.refusal('10.0.0.1'), null, 'and nothing else');
    t.equal(exempt.refusal('::ffff:7f00:1'), null, 'nor its IPv4-mapped form, which reaches the same host');
    for (const a of ['::7f00:1', '::127.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::1', '::ffff:0:7f00:1'])
      t.not(exempt.refusal(a), null, `but not ${a}, which carries 127.0.0.1 and reaches another host`);
    t.equal(new AddressGuard(['64:ff9b::/96']).refusal('64:ff9b::a00:1'), null, 'a NAT64 prefix exempted as itself');
    t.ok((await new AddressGuard(['localhost']).resolve('localhost')).ok, 'or a host name');
  },
);

t.test(
  'every textual form of an internal address is refused at delivery, and so is a name resolving to one',
  async (t) => {
    const receiver = await Receiver.start();
    t.teardown(() => receiver.close());
    const port = new URL(receiver.url).port;
    const guard = new AddressGuard([]);
    for (const [what, host] of internalHosts) {
      const r = await postOnce(new URL(`http://${host}:${port}/hook`), '{}', {}, guard, 1000);
      t.match(r, { ok: false, refused: true, status: null, error: /SSRF guard/ }, `${what}: ${host}`);
    }
    t.equal(receiver.received.length, 0, 'nothing reached the receiver');
    // Names, through a resolver that answers each internal form (the system's cannot be told what to answer).
    const internal = internalAddresses();
    const names = new Map<string, string[]>(internal.map((a, i) => [`internal-${i}.example`, [a]]));
    names.set('all-internal.example', internal);
    names.set('mixed.example', ['10.0.0.1', '93.184.215.14', '::7f00:1']);
    const resolving = new AddressGuard([], (host) => {
      const found = names.get(host);
      return found
        ? Promise.resolve(found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })))
        : Promise.reject(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }));
    });
    for (const [name, addresses] of names) {
      if (name === 'mixed.example') continue;
      t.match(await resolving.resolve(name), { ok: false, error: /SSRF guard/ }, `${name} (${addresses.join(', ')})`);
      t.match(await resolving.refusalOf(name), /SSRF guard/, `${name} is refused when an endpoint is set`);
    }
    t.same(
      await resolving.resolve('mixed.example'),
      { ok: true, value: { address: '93.184.215.14', family: 4 } },
      'a name with a public address among internal ones connects to the public one only',
    );
    t.equal(
      await resolving.refusalOf('unknown.example'),
      null,
      'a name that does not resolve yet is judged at delivery',
    );
    t.match(await resolving.resolve('unknown.example'), { ok: false, error: /DNS lookup/ }, 'and not reached then');
  },
);

t.test('postOnce: refused addresses are never contacted; 3xx fails and is not followed; a hard deadline', async (t) => {
  const receiver = await Receiver.start();
  t.teardown(() => receiver.close());
  const guard = new AddressGuard([]);
  const port = new URL(receiver.url).port;
  for (const url of [
    `http://127.0.0.1:${port}/`,
    `http://localhost:${port}/`,
    'http://10.0.0.1/',
    'http://169.254.169.254/latest/meta-data/',
    `http://[::ffff:127.0.0.1]:${port}/`,
  ]) {
    const r = await postOnce(new URL(url), '{}', {}, guard, 1000);
    t.match(r, { ok: false, refused: true, status: null, error: /SSRF guard/ }, url);
  }
  t.equal(receiver.received.length, 0, 'nothing reached the receiver');
  const open = new AddressGuard(['127.0.0.0/8']);
  receiver.respond = () => ({ status: 301, headers: { Location: `${receiver.url}/moved` } });
  const moved = await postOnce(new URL(`${receiver.url}/hook?x=1`), '{"a":1}', { 'X-Test': '1' }, open, 1000);
  t.match(moved, { ok: false, status: 301, refused: false });
  t.equal(receiver.received.length, 1, 'the redirect is not followed');
  t.match(receiver.received[0], { path: '/hook?x=1', body: '{"a":1}' });
  t.equal(receiver.received[0]!.headers.host, `127.0.0.1:${port}`);

  const slow = createServer((_req, res) => {
    res.writeHead(200);
    res.write('partial');
    // The rest of the answer never comes in time.
    setTimeout(() => res.end(), 3000).unref();
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    slow.closeAllConnections();
    slow.close();
  });
  const started = Date.now();
  const late = await postOnce(
    new URL(`http://127.0.0.1:${(slow.address() as { port: number }).port}/`),
    '{}',
    {},
    open,
    500,
  );
  t.match(late, { ok: false, error: /within 500 ms/ }, 'a 200 whose body is not complete in time is a failure');
  t.ok(Date.now() - started < 1500, 'given up at the deadline');
});

t.test("Slack: a readable message with the alert's facts and a link; one per second per URL", async (t) => {
  const m = slackMessage(
    {
      id: 'evt_1',
      type: 'qos.rebuffer_spike',
      created_at: '2026-11-21T10:00:00Z',
      tenant_slug: 'acme',
      data: {
        severity: 'critical',
        region: 'Maharashtra',
        pop: 'bom1',
        current_rate: 9.1,
        baseline_rate: 2,
        affected_sessions: 40,
        cohort: { dimension: 'app_version', value: '5.13.0', current_rate: 31.5, baseline_rate: 2.2, share: 0.93 },
      },
    },
    'https://darshak.example',
  );
  t.match(
    m.text,
    /critical.*Rebuffering spike.*Maharashtra \/ bom1, mostly app version 5\.13\.0.*9\.1 %.*baseline 2 %/,
  );
  const blocks = JSON.stringify(m.blocks);
  for (const s of [
    'Rebuffering spike',
    'critical',
    'Maharashtra / bom1',
    '9.1 % (baseline 2 %)',
    'Affected sessions',
    '40',
    'https://darshak.example',
    '*Cohort*\\napp version 5.13.0, 93 % of it: 31.5 % (baseline 2.2 %)',
  ])
    t.ok(blocks.includes(s), s);
  const drop = slackMessage(
    {
      id: 'evt_2',
      type: 'content.completion_drop',
      created_at: '2026-11-21T10:00:00Z',
      tenant_slug: 'acme',
      data: {
        severity: 'warning',
        content_id: 'c4',
        title: 'Final, India v Australia',
        current_pct: 49.76,
        baseline_pct: 69.78,
        cohort: {
          dimension: 'region',
          value: 'Kerala',
          current_pct: 37.22,
          baseline_pct: 70.55,
          share: 1,
          sessions: 565,
        },
      },
    },
    'https://darshak.example',
  );
  t.match(drop.text, /warning.*Completion drop, mostly region Kerala: 49\.76 % \(baseline 69\.78 %\)/);
  t.ok(JSON.stringify(drop.blocks).includes('*Cohort*\\nregion Kerala, 100 % of it: 37.22 % (baseline 70.55 %)'));
  const pacer = new SlackPacer();
  t.same(pacer.reserve('u', 0), { at: 0, waitMs: 0, reserved: true });
  t.same(pacer.reserve('u', 10), { at: 1000, waitMs: 990, reserved: true });
  t.same(
    pacer.reserve('u', 20),
    { at: 2000, waitMs: 1980, reserved: false },
    'past a second of waiting, come back later',
  );
  t.same(pacer.reserve('v', 20), { at: 20, waitMs: 0, reserved: true }, 'per URL');
});

t.test('values from ingest reach Slack as text: no mention, no link, bounded length', async (t) => {
  const hostile = {
    region: '<!channel> Maharashtra',
    pop: '<https://evil.example/login|Open Darshak>',
    title: `<@U024BE7LH> & ${'x'.repeat(5000)}`,
    current_rate: 9.1,
    baseline_rate: '<!here>',
    affected_sessions: '<!everyone>',
    cohort: {
      dimension: '<!here>',
      value: '<https://evil.example|5.13.0>',
      current_rate: '<!channel>',
      baseline_rate: 1,
      share: 0.9,
    },
  };
  const m = slackMessage(
    {
      id: 'evt_2',
      type: 'qos.rebuffer_spike',
      created_at: '2026-11-21T10:00:00Z',
      tenant_slug: 'acme',
      data: { severity: '<!subteam^S1>', ...hostile },
    },
    'https://darshak.example',
  );
  const texts = [
    m.text,
    ...JSON.stringify(m.blocks)
      .match(/"text":"(?:[^"\\]|\\.)*"/g)!
      .map((x) => (JSON.parse(`{${x}}`) as { text: string }).text),
  ];
  for (const text of texts) {
    // Slack's own control sequences start with "<"; the only one a message may hold is Darshak's link.
    const controls = text.match(/<[^>]*>?/g) ?? [];
    t.same(
      controls.filter((c) => c !== '<https://darshak.example/alerts|Open the alerts in Darshak>'),
      [],
      `no Slack control sequence in ${JSON.stringify(text.slice(0, 80))}`,
    );
    t.ok(text.length <= 600, 'each text stays short');
  }
  t.ok(
    texts.some((x) => x.includes('&lt;!channel&gt; Maharashtra')),
    'the region is shown, escaped',
  );
  t.ok(
    texts.some((x) => x.includes('&lt;@U024BE7LH&gt; &amp; xxx')),
    'the title is shown, escaped, and cut',
  );
});

t.test('without SMTP_URL each e-mail is an .eml file in DATA_DIR/outbox/', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'darshak-outbox-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const mailer = new Mailer({ smtp_url: '', data_dir: dir, public_base_url: 'https://darshak.example' });
  await mailer.send({
    to: ['owner@acme.test', 'second@acme.test'],
    subject: 'Darshak: webhook endpoint disabled',
    text: 'It failed seven times.',
  });
  const files = readdirSync(join(dir, 'outbox'));
  t.equal(files.length, 1);
  t.match(files[0], /\.eml$/);
  const eml = readFileSync(join(dir, 'outbox', files[0]!), 'utf8');
  t.match(eml, /^To: owner@acme\.test, second@acme\.test$/m);
  t.match(eml, /^From: Darshak <no-reply@darshak\.example>$/m);
  t.match(eml, /^Subject: Darshak: webhook endpoint disabled$/m);
  t.match(eml, /It failed seven times\./);
});
