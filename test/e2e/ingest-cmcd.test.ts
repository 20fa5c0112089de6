import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeCmcd } from '@svta/cml-cmcd';
import t from 'tap';
import { login } from '../helpers/api.js';
import { httpAnswers } from '../helpers/compare.js';
import {
  cli,
  drained,
  eventually,
  makeTenant,
  post,
  readEventStream,
  startService,
  type Service,
} from '../helpers/env.js';

// POST /v1/ingest/cmcd as a player's CMCD v2 event target sees it (docs/cmcd.md), and the analytics of playbacks
// reported through it against the same playbacks sent as our own events.

const ua =
  'Mozilla/5.0 (Linux; Android 13; SM-S908B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/112.0.0.0 Mobile Safari/537.36';
const line = (r: Record<string, unknown>): string => encodeCmcd({ v: 2, ...r }, { reportingMode: 'event' });
const cmcdPost = (url: string, body: string, headers: Record<string, string> = {}) =>
  post(url, body, { 'content-type': 'application/cmcd', 'user-agent': ua, ...headers });

t.test('the endpoint: bodies, answers, keys', async (t) => {
  const svc: Service = await startService();
  t.teardown(() => svc.stop());
  const prefix = svc.config.nats_prefix;
  const tenant = await makeTenant(prefix);
  const url = `${svc.ingestUrl}/v1/ingest/cmcd?api_key=${tenant.key}`;
  const now = Date.now();
  const published = async (): Promise<number> =>
    (await readEventStream(prefix)).reduce((n, m) => n + m.events.length, 0);

  const start = line({ e: 'ps', sta: 's', ts: now, sid: 's-1', cid: 'final', sn: 0 });
  const r = await cmcdPost(
    url,
    [
      start,
      'e=t,oops,',
      line({ e: 'm', ts: now, sid: 's-1', sn: 1 }),
      '',
      line({ e: 't', sta: 'p', ts: now, sid: 's-1', sn: 2 }),
    ].join('\n'),
  );
  t.equal(r.status, 200);
  t.match(r.body, {
    accepted: 2,
    rejected: 1,
    ignored: 1,
    queued: true,
    errors: [{ line: 2, code: 'invalid_report', message: /character/ }],
  });
  t.ok(r.headers.get('ratelimit-limit'));
  t.not(await eventually(async () => (await published()) === 2), -1, 'the two events are in the stream');

  t.test('text/plain (sendBeacon) and a JSON array are the same reports', async (t) => {
    const plain = await post(url, line({ e: 't', sta: 'p', ts: now, sid: 's-2', sn: 0 }), {
      'content-type': 'text/plain;charset=UTF-8',
    });
    t.match(plain.body, { accepted: 1, rejected: 0 });
    const json = await post(url, [{ e: 't', sta: 'p', ts: now, sid: 's-3', sn: 0 }, 'not an object']);
    t.match(json.body, { accepted: 1, rejected: 1, errors: [{ line: 2, code: 'invalid_report' }] });
    const key = await post(`${svc.ingestUrl}/v1/ingest/cmcd`, line({ e: 't', ts: now, sid: 's-4' }), {
      'content-type': 'application/cmcd',
      'x-api-key': tenant.key,
    });
    t.equal(key.status, 200, 'the key also as X-API-Key');
  });

  t.test('answers a player acts on: 410 gives the target up, 4xx drops the batch, 429/5xx retry', async (t) => {
    for (const u of [`${svc.ingestUrl}/v1/ingest/cmcd?api_key=dk_live_nope`, `${svc.ingestUrl}/v1/ingest/cmcd`]) {
      const gone = await cmcdPost(u, start);
      t.equal(gone.status, 410);
      t.equal((gone.body.error as { code: string }).code, 'api_key_gone');
    }
    const bad = await cmcdPost(url, 'E=t\ne=t,ts=1');
    t.equal(bad.status, 400);
    t.match(bad.body.error, {
      code: 'validation_failed',
      details: [
        { line: 1, code: 'invalid_report' },
        { line: 2, code: 'invalid_report', message: /sid/ },
      ],
    });
    t.equal((await cmcdPost(url, '\n\n')).status, 400, 'no report at all');
    const media = await post(url, start, { 'content-type': 'application/xml' });
    t.equal(media.status, 415);
    t.equal((media.body.error as { code: string }).code, 'unsupported_media_type');
    const big = await cmcdPost(url, `${start}\n`.repeat(20_000));
    t.equal(big.status, 413);
    const only = await cmcdPost(url, line({ e: 'um', ts: now, sid: 's-5' }));
    t.match(
      only,
      { status: 200, body: { accepted: 0, rejected: 0, ignored: 1, queued: false } },
      'a report that feeds no metric is not an error',
    );

    const revoked = await cli(
      ['apikey', 'create', '--tenant', 'acme', '--name', 'old', '--environment', 'production'],
      { NATS_PREFIX: prefix },
    );
    const old = JSON.parse(revoked.stdout) as { id: string; key: string };
    await cli(['apikey', 'revoke', '--tenant', 'acme', '--id', old.id], { NATS_PREFIX: prefix });
    t.not(
      await eventually(
        async () => (await cmcdPost(`${svc.ingestUrl}/v1/ingest/cmcd?api_key=${old.key}`, start)).status === 410,
        5000,
      ),
      -1,
      'a revoked key is gone',
    );
  });

  t.test('a cross-origin application/cmcd POST passes its preflight', async (t) => {
    const res = await fetch(url, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://player.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    t.equal(res.status, 204);
    t.equal(res.headers.get('access-control-allow-origin'), '*');
    t.match(res.headers.get('access-control-allow-headers') ?? '', /content-type/i);
  });
});

/** One playback moment, as the player's state and what it reports. */
interface Moment {
  ts: number;
  kind:
    | 'start'
    | 'first_frame'
    | 'tick'
    | 'stall'
    | 'stall_end'
    | 'pause'
    | 'resume'
    | 'seek'
    | 'seek_end'
    | 'bitrate'
    | 'error'
    | 'fatal'
    | 'end';
  pt: number;
  br: number;
}

/** Sessions of the last 25 s (reports are stamped with their time; more than 30 s off it would be taken as now). */
function playbacks(
  now: number,
  count: number,
): Array<{ sid: string; cid: string; region?: string; moments: Moment[] }> {
  const out = [];
  for (let i = 0; i < count; i++) {
    let ts = now - 25_000 + i * 300;
    let pt = 0;
    const moments: Moment[] = [];
    const at = (kind: Moment['kind'], step: number, br = 3000): void => {
      ts += step;
      if (kind !== 'start') pt += step;
      moments.push({ ts, kind, pt, br });
    };
    at('start', 0);
    at('first_frame', 400 + i * 50);
    at('tick', 2000);
    if (i % 3 === 0) {
      at('stall', 500);
      at('tick', 1500);
      at('stall_end', 700);
    }
    if (i % 4 === 1) at('bitrate', 800, 1500);
    if (i % 3 === 1) {
      at('pause', 1000);
      at('resume', 3000);
    }
    if (i % 5 === 2) {
      at('seek', 600);
      at('seek_end', 300);
    }
    at('tick', 2000);
    if (i % 4 === 3) at('error', 300);
    if (i === 5) at('fatal', 900);
    else at('end', 1200);
    out.push({
      sid: `cmcd-${now}-${i}`,
      cid: i % 2 ? 'final' : 'highlights',
      region: i % 3 ? 'Kerala' : undefined,
      moments,
    });
  }
  return out;
}

const cmcdOf: Record<Moment['kind'], Record<string, unknown>> = {
  start: { e: 'ps', sta: 's' },
  first_frame: { e: 'ps', sta: 'p' },
  tick: { e: 't' },
  stall: { e: 'ps', sta: 'r' },
  stall_end: { e: 'ps', sta: 'p' },
  pause: { e: 'ps', sta: 'a' },
  resume: { e: 'ps', sta: 'p' },
  seek: { e: 'ps', sta: 'k' },
  seek_end: { e: 'ps', sta: 'p' },
  bitrate: { e: 'bc' },
  error: { e: 'e', ec: ['MEDIA_ERR_NETWORK'] },
  fatal: { e: 'ps', sta: 'f', ec: ['MEDIA_ERR_DECODE'] },
  end: { e: 'ps', sta: 'e' },
};
const eventOf: Record<Moment['kind'], string> = {
  start: 'play_start',
  first_frame: 'first_frame',
  tick: 'heartbeat',
  stall: 'rebuffer_start',
  stall_end: 'rebuffer_end',
  pause: 'pause',
  resume: 'resume',
  seek: 'seek_start',
  seek_end: 'seek_end',
  bitrate: 'bitrate_change',
  error: 'error',
  fatal: 'error',
  end: 'ended',
};

t.test('a playback reported through CMCD gives the answers of the same playback sent as events', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'darshak-cmcd-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const svc = await startService({ data_dir: dataDir }, 'all');
  t.teardown(() => svc.stop());
  const prefix = svc.config.nats_prefix;
  const viaCmcd = await makeTenant(prefix, 'viacmcd', 'enterprise');
  const viaEvents = await makeTenant(prefix, 'viaevents', 'enterprise');
  const now = Date.now();
  const sessions = playbacks(now, 12);

  const lines: string[] = [];
  const events: Array<Record<string, unknown>> = [];
  for (const s of sessions) {
    let state = 's';
    s.moments.forEach((m, sn) => {
      const report: Record<string, unknown> = {
        ...cmcdOf[m.kind],
        ts: m.ts,
        sid: s.sid,
        cid: s.cid,
        sn,
        pt: m.pt,
        br: [m.br],
        st: 'v',
      };
      if (report.sta) state = report.sta as string;
      else report.sta = state;
      if (m.kind === 'first_frame') report.msd = m.ts - s.moments[0]!.ts;
      if (s.region) report['io.darshak-region'] = s.region;
      lines.push(line(report));
      const event: Record<string, unknown> = {
        event_type: eventOf[m.kind],
        ts: new Date(m.ts).toISOString(),
        session_id: s.sid,
        content_id: s.cid,
        anonymous_id: s.sid,
        position_sec: Math.floor(m.pt / 1000),
        bitrate_kbps: m.br,
      };
      if (s.region) event.context = { region: s.region };
      if (m.kind === 'error' || m.kind === 'fatal') event.properties = { fatal: m.kind === 'fatal' };
      events.push(event);
    });
  }
  const first = await cmcdPost(`${svc.ingestUrl}/v1/ingest/cmcd?api_key=${viaCmcd.key}`, lines.join('\n'));
  t.match(first.body, { accepted: lines.length, rejected: 0, ignored: 0 });
  const retried = await cmcdPost(
    `${svc.ingestUrl}/v1/ingest/cmcd?api_key=${viaCmcd.key}`,
    lines.slice(0, 20).join('\n'),
  );
  t.match(retried.body, { accepted: 20 }, 'a batch sent again is accepted and counted once');
  const sent = await post(
    `${svc.ingestUrl}/v1/ingest/events`,
    { events },
    { 'x-api-key': viaEvents.key, 'user-agent': ua },
  );
  t.match(sent.body, { accepted: events.length, rejected: 0 });
  t.not(await eventually(() => drained(prefix, svc.config.shards), 30_000, 200), -1, 'aggregated and flushed');

  const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;
  const answers = httpAnswers(base, {
    viacmcd: await login(base, 'owner@viacmcd.test'),
    viaevents: await login(base, 'owner@viaevents.test'),
  });
  const overview = (await answers.overview('viacmcd', '24h')) as Record<string, unknown>;
  t.equal(overview.monthly_active_users, 12, 'each session its own viewer: no viewer key was sent');
  t.ok(Number(overview.watch_hours) > 0);
  // The events tenant got each event once: equal answers also say the retried CMCD batch was counted once.
  for (const [name, ask] of [
    ['overview', (x: string) => answers.overview(x, '24h')],
    ['top content', (x: string) => answers.topContent(x, '24h')],
    ['geo', (x: string) => answers.geo(x, '24h')],
    ['devices', (x: string) => answers.devices(x, '24h')],
    ['qos', (x: string) => answers.qos(x, '24h')],
    ['concurrency', (x: string) => answers.concurrency(x, '24h', 1)],
  ] as const) {
    t.same(await ask('viacmcd'), await ask('viaevents'), `${name}: the same through CMCD as through events`);
  }
});
