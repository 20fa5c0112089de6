import t from 'tap';
import { cli, eventually, makeTenant, post, startService, uniquePrefix, type Service } from '../helpers/env.js';
import { autoEngine } from '../helpers/engines.js';

// Rate and quota hold across ingest processes (docs/limits.md): two ingest instances on one namespace share their
// counts through NATS KV. Without the sharing each would admit the full limit, and the totals below would double.

async function freshMinute(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 20_000) await new Promise((r) => setTimeout(r, left + 50));
}

t.test('two ingest processes share one rate limit and one monthly quota', async (t) => {
  const prefix = uniquePrefix();
  const a: Service = await startService({ nats_prefix: prefix, http_engine: autoEngine });
  const b: Service = await startService({ nats_prefix: prefix, http_engine: 'node' });
  t.teardown(async () => {
    await a.stop();
    await b.stop();
  });
  const tenant = await makeTenant(prefix, 'shared', 'free');
  const env = { NATS_PREFIX: prefix };
  const auth = { 'x-api-key': tenant.key };
  const one = { events: [{ event_type: 'heartbeat', session_id: 's' }] };
  const urls = [a.ingestUrl, b.ingestUrl].map((u) => `${u}/v1/ingest/events`);

  // Every event this tenant gets accepted this month, probes included: the quota below is set relative to it.
  let total = 0;
  const acceptedAt: number[] = [];
  const send = async (url: string) => {
    const r = await post(url, one, auth);
    if (r.status === 200) {
      total++;
      acceptedAt.push(Date.now());
    }
    return r;
  };

  t.equal((await cli(['tenant', 'update', '--slug', 'shared', '--rate-per-minute', '20'], env)).code, 0);
  t.not(await eventually(async () => (await send(urls[1] as string)).headers.get('ratelimit-limit') === '20'), -1);
  await freshMinute();
  const minute = Math.floor(Date.now() / 60_000);
  const earlier = acceptedAt.filter((at) => Math.floor(at / 60_000) === minute).length;
  let accepted = 0;
  let limited = 0;
  for (let i = 0; i < 60; i++) {
    const r = await send(urls[i % 2] as string);
    if (r.status === 200) accepted++;
    else if (r.status === 429) limited++;
    await new Promise((r) => setTimeout(r, 50));
  }
  // Probes sent earlier in this minute count towards it too.
  t.ok(earlier + accepted >= 20, `no refusal below the limit (${accepted} accepted, ${earlier} earlier this minute)`);
  t.ok(
    earlier + accepted <= 30,
    `the two processes together admit about the limit, not twice it (${earlier + accepted} in the minute)`,
  );
  t.equal(accepted + limited, 60);

  const quota = total + 25;
  t.equal(
    (
      await cli(
        ['tenant', 'update', '--slug', 'shared', '--rate-per-minute', 'plan', '--monthly-quota', String(quota)],
        env,
      )
    ).code,
    0,
  );
  t.not(await eventually(async () => (await send(urls[0] as string)).headers.get('ratelimit-limit') === '120000'), -1);
  const remaining = quota - total;
  let month = 0;
  for (let i = 0; i < 60; i++) {
    const r = await send(urls[i % 2] as string);
    if (r.status === 200) month++;
    else t.equal((r.body.error as { code: string }).code, 'quota_exceeded');
    await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(
    month >= remaining && month <= remaining + 10,
    `the month admits about the quota across both (${month} of the ${remaining} left)`,
  );

  // The month's count is in the bucket: a new process knows it.
  const c: Service = await startService({ nats_prefix: prefix });
  t.teardown(() => c.stop());
  const r = await post(`${c.ingestUrl}/v1/ingest/events`, one, auth);
  t.equal(r.status, 403, 'a process started later still refuses');
});
