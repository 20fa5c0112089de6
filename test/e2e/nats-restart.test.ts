// kill -9 of the NATS server under ingest load, then a restart on the same port and store: while it is down
// ingest answers 503 ingest_degraded (never another 5xx) and /readyz 503; afterwards everything recovers by
// itself (publishing, /readyz, the control-plane KV watches, the shared usage counters), and the stream holds
// exactly the events that were answered "accepted", each once. An aggregator and a flusher, separate processes,
// ride out the outage too (their output fails to publish and is regenerated): the store holds each accepted event once.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connect, type NatsConnection } from 'nats';
import { monthOf } from '../../src/control/usage.js';
import { createLogger } from '../../src/log.js';
import { select } from '../../src/store/queries/range.js';
import { Store } from '../../src/store/store.js';
import {
  cli,
  drained,
  eventually,
  makeTenant,
  readEventStream,
  RoleProcesses,
  startService,
  type Service,
  freePort,
} from '../helpers/env.js';
import { PrivateNats } from '../../bench/private-nats.js';
import { engineTest } from '../helpers/engines.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Answer {
  sender: number;
  ids: string[];
  status: number;
  code: string | null;
  accepted: string[];
  started: number;
  ended: number;
  problem: string | null;
}

/** One answer of POST /v1/ingest/events, judged: which of its ids were accepted, and what is wrong with it. */
async function sendBatch(url: string, key: string, sender: number, seq: number): Promise<Answer> {
  const n = 1 + ((seq * 7 + sender) % 6);
  const ids = Array.from({ length: n }, () => randomUUID());
  const events = ids.map((id, i) => ({
    event_type: 'heartbeat',
    event_id: id,
    session_id: `s${sender}-${(seq + i) % 50}`,
    anonymous_id: `a${sender}`,
  }));
  const started = Date.now();
  const a: Answer = { sender, ids, status: 0, code: null, accepted: [], started, ended: started, problem: null };
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ events }),
    });
    const text = await res.text();
    a.ended = Date.now();
    a.status = res.status;
    let body: {
      accepted?: unknown;
      rejected?: unknown;
      errors?: Array<{ index: number; code: string }>;
      error?: { code?: string };
    };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      a.problem = `status ${res.status}, body not JSON: ${text.slice(0, 200)}`;
      return a;
    }
    if (res.status === 200) {
      const errors = Array.isArray(body.errors) ? body.errors : [];
      const refused = new Set(errors.map((e) => e.index));
      a.accepted = ids.filter((_, i) => !refused.has(i));
      if (errors.some((e) => e.code !== 'ingest_degraded'))
        a.problem = `200 with unexpected per-event errors: ${text.slice(0, 300)}`;
      else if (body.accepted !== a.accepted.length || body.rejected !== errors.length || a.accepted.length === 0)
        a.problem = `200 whose counts do not add up: ${text.slice(0, 300)}`;
    } else {
      a.code = body.error?.code ?? null;
      if (!(res.status === 503 && a.code === 'ingest_degraded'))
        a.problem = `status ${res.status}: ${text.slice(0, 300)}`;
    }
  } catch (err) {
    a.ended = Date.now();
    a.problem = `connection error: ${((err as Error & { cause?: Error }).cause ?? (err as Error)).message}`;
  }
  return a;
}

async function status(url: string): Promise<number> {
  try {
    const res = await fetch(url);
    await res.arrayBuffer();
    return res.status;
  } catch {
    return -1;
  }
}

const engines = (process.env.NATS_RESTART_ENGINES ?? 'uws,node').split(',') as Array<'uws' | 'node'>;

for (const engine of engines) {
  t.test(`NATS killed and restarted under ingest load (${engine})`, engineTest(engine), async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'darshak-nats-'));
    const nats = new PrivateNats(await freePort(true), dir);
    let svc: Service | undefined;
    let nc: NatsConnection | undefined;
    // One teardown, in order: the client and the service while NATS is still up, then the server, then its store.
    t.teardown(async () => {
      await nc?.close().catch(() => undefined);
      await svc?.stop();
      await nats.kill();
      await rm(dir, { recursive: true, force: true });
    });
    await nats.start();

    svc = await startService({ nats_url: nats.url, http_engine: engine });
    const prefix = svc.config.nats_prefix;
    const env = { NATS_PREFIX: prefix, NATS_URL: nats.url };
    // Downstream of ingest, as separate processes: every shard's aggregator, and a flusher with its own store.
    const procs = new RoleProcesses(env, t);
    t.teardown(() => procs.stopAll());
    procs.start(['--role', 'aggregate']);
    const flusher = procs.start(['--role', 'flush'], { DATA_DIR: join(dir, 'store') });
    const tenant = await makeTenant(prefix, 'restarty', 'enterprise', nats.url);
    const other = await makeTenant(prefix, 'bystander', 'enterprise', nats.url);
    const spare = await cli(
      ['apikey', 'create', '--tenant', tenant.slug, '--name', 'spare', '--environment', 'production'],
      env,
    );
    t.equal(spare.code, 0, spare.stderr);
    const spareKey = String(spare.json?.key);
    const spareId = String(spare.json?.id);
    const ingestUrl = `${svc.ingestUrl}/v1/ingest/events`;
    const readyz = `${svc.ingestUrl}/readyz`;
    t.equal(await status(readyz), 200, 'ready before the load');

    /** Events accepted outside the load (the control-plane probes), per tenant, so that the accounting stays exact. */
    const probeAccepted = new Map<string, string[]>([
      [tenant.slug, []],
      [other.slug, []],
    ]);
    // `invalid`: a batch with no valid event, which passes the key and quota checks but adds nothing to the usage
    // counts (so the service cannot learn a count by writing its own).
    const probe = async (slug: string, key: string, invalid = false): Promise<{ status: number; code?: string }> => {
      const id = randomUUID();
      try {
        const res = await fetch(ingestUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body: JSON.stringify({
            events: [
              invalid ? { event_type: 'heartbeat' } : { event_type: 'heartbeat', event_id: id, session_id: 'probe' },
            ],
          }),
        });
        const body = (await res.json()) as { accepted?: number; error?: { code: string } };
        if (res.status === 200 && body.accepted === 1) probeAccepted.get(slug)?.push(id);
        return { status: res.status, code: body.error?.code };
      } catch {
        return { status: -1 };
      }
    };
    t.equal((await probe(other.slug, other.key)).status, 200, 'the bystander tenant ingests');
    t.equal((await probe(tenant.slug, spareKey)).status, 200, 'the spare key ingests');

    const answers: Answer[] = [];
    let running = true;
    const senders = Array.from({ length: 8 }, async (_, sender) => {
      for (let seq = 0; running; seq++) {
        answers.push(await sendBatch(ingestUrl, tenant.key, sender, seq));
        await sleep(5);
      }
    });

    // 1. NATS up.
    await sleep(3000);
    const upAnswers = answers.length;
    t.ok(upAnswers > 50, `${upAnswers} answers while NATS is up`);
    t.same(answers.filter((a) => a.status !== 200).slice(0, 5), [], 'every answer is 200 while NATS is up');

    // 2. kill -9 mid-load; keep sending for 6 s: longer than the load shedder's target lag (5 s by default), which the
    // messages published just before the kill, never stored meanwhile, pass; an outage is not an overload.
    const killedAt = Date.now();
    await nats.kill();
    const notReadyAfter = await eventually(async () => (await status(readyz)) === 503, 5000, 20);
    t.not(notReadyAfter, -1, `/readyz answers 503 once NATS is gone (after ${notReadyAfter} ms)`);
    // The senders' requests that were in flight at the kill wait for their publish deadline; these probes (and the
    // senders that were between requests) start while NATS is known to be down.
    const readyzWhileDown: number[] = [];
    const downUntil = Date.now() + 6000;
    for (let i = 0; Date.now() < downUntil; i++) {
      const [ready, answer] = await Promise.all([status(readyz), sendBatch(ingestUrl, tenant.key, 99, i)]);
      readyzWhileDown.push(ready);
      answers.push(answer);
      await sleep(100);
    }
    t.ok(
      readyzWhileDown.every((s) => s === 503),
      `/readyz is 503 throughout the outage (${readyzWhileDown.length} probes)`,
    );
    const restartAt = Date.now();
    const duringOutage = answers.filter((a) => a.started >= killedAt + notReadyAfter && a.ended <= restartAt);
    t.ok(duringOutage.length >= 10, `${duringOutage.length} answers during the outage`);
    t.same(
      duringOutage.filter((a) => !(a.status === 503 && a.code === 'ingest_degraded')).slice(0, 5),
      [],
      'every request sent while NATS was known down got 503 ingest_degraded',
    );

    // 3. Restart on the same port and store; ingest recovers by itself.
    await nats.start();
    const recovered = await eventually(
      async () => answers.some((a) => a.started >= restartAt && a.status === 200),
      20_000,
      50,
    );
    t.not(recovered, -1, `ingest answers 200 again ${recovered} ms after nats-server was restarted`);
    t.not(await eventually(async () => (await status(readyz)) === 200, 10_000, 50), -1, '/readyz is 200 again');
    const recoveredAt = Date.now();

    // 4. Right after the restart, under load, the control-plane KV watches and the usage watch see changes
    // made elsewhere (here by the CLI, another process) within the contract's second (1.5 s allowed for CI).
    const within = 1500;
    const created = await cli(
      ['apikey', 'create', '--tenant', tenant.slug, '--name', 'after-restart', '--environment', 'production'],
      env,
    );
    t.equal(created.code, 0, created.stderr);
    const newKey = String(created.json?.key);
    const keySeen = await eventually(async () => (await probe(tenant.slug, newKey)).status === 200, 15_000, 20);
    t.ok(
      keySeen >= 0 && keySeen <= within,
      `a key created after the restart is usable within ${within} ms (took ${keySeen} ms)`,
    );

    const revoked = await cli(['apikey', 'revoke', '--tenant', tenant.slug, '--id', spareId], env);
    t.equal(revoked.code, 0, revoked.stderr);
    const revokeSeen = await eventually(
      async () => (await probe(tenant.slug, spareKey)).code === 'invalid_api_key',
      15_000,
      20,
    );
    t.ok(
      revokeSeen >= 0 && revokeSeen <= within,
      `a key revoked after the restart stops working within ${within} ms (took ${revokeSeen} ms)`,
    );

    nc = await connect({ servers: nats.url });
    const usage = await nc.jetstream().views.kv(`${prefix}_usage`);
    await usage.put(`${other.slug}.${monthOf(Date.now())}`, new TextEncoder().encode(String(2_000_000_000)));
    const quotaSeen = await eventually(
      async () => (await probe(other.slug, other.key, true)).code === 'quota_exceeded',
      15_000,
      20,
    );
    t.ok(
      quotaSeen >= 0 && quotaSeen <= within,
      `a usage count written elsewhere after the restart is seen within ${within} ms (took ${quotaSeen} ms)`,
    );

    const inactive = await cli(['tenant', 'update', '--slug', other.slug, '--status', 'inactive'], env);
    t.equal(inactive.code, 0, inactive.stderr);
    const statusSeen = await eventually(
      async () => (await probe(other.slug, other.key)).code === 'tenant_inactive',
      15_000,
      20,
    );
    t.ok(
      statusSeen >= 0 && statusSeen <= within,
      `a tenant deactivated after the restart is refused within ${within} ms (took ${statusSeen} ms)`,
    );
    t.comment(`control-plane checks done ${Date.now() - recoveredAt} ms after the recovery`);

    // 5. More load, then stop.
    await sleep(2000);
    running = false;
    await Promise.all(senders);
    t.ok(
      answers.filter((a) => a.started >= recoveredAt).every((a) => a.status === 200),
      'every answer after the recovery is 200',
    );

    // Nothing but 200 and 503 ingest_degraded, ever; no connection errors.
    const problems = answers.filter((a) => a.problem !== null);
    t.same(problems.slice(0, 10), [], 'no answer other than 200 and 503 ingest_degraded, no connection error');
    const tally = new Map<string, number>();
    for (const a of answers) {
      const k = `${a.status}${a.code ? ` ${a.code}` : ''}${a.status === 200 && a.accepted.length < a.ids.length ? ' partial' : ''}`;
      tally.set(k, (tally.get(k) ?? 0) + 1);
    }
    const slowest = answers.reduce((m, a) => Math.max(m, a.ended - a.started), 0);
    t.comment(
      `${answers.length} answers: ${[...tally.entries()].map(([k, v]) => `${k}=${v}`).join(', ')}; slowest ${slowest} ms`,
    );
    t.ok(
      slowest <= svc.config.publish_timeout_ms + 1500,
      `no request waited much past the publish deadline (slowest ${slowest} ms)`,
    );

    // 6. The stream holds exactly the accepted events, each once.
    const acceptedLoad = answers.reduce((n, a) => n + a.accepted.length, 0);
    const acceptedIds = [...answers.flatMap((a) => a.accepted), ...[...probeAccepted.values()].flat()];
    const accepted = new Set(acceptedIds);
    const acceptedSum = acceptedIds.length;
    t.equal(accepted.size, acceptedSum, 'no event_id was answered accepted twice');
    const sent = new Set([...answers.flatMap((a) => a.ids), ...acceptedIds]);
    const messages = await readEventStream(prefix, nats.url);
    const inStream = new Map<string, number>();
    for (const m of messages)
      for (const e of m.events) inStream.set(String(e.event_id), (inStream.get(String(e.event_id)) ?? 0) + 1);
    const streamEvents = messages.reduce((n, m) => n + m.events.length, 0);
    const missing = [...accepted].filter((id) => !inStream.has(id));
    const twice = [...inStream.entries()].filter(([, n]) => n > 1);
    const extra = [...inStream.keys()].filter((id) => !accepted.has(id));
    t.comment(
      `stream: ${messages.length} messages, ${streamEvents} events; accepted ${acceptedSum} (${acceptedLoad} from the load)`,
    );
    t.same(missing.slice(0, 5), [], `every accepted event is in the stream (${missing.length} missing)`);
    t.same(twice.slice(0, 5), [], 'no event_id is in the stream twice');
    t.same(extra.filter((id) => !sent.has(id)).slice(0, 5), [], 'nothing in the stream that was never sent');
    t.same(extra.slice(0, 5), [], `nothing in the stream that was answered 503 (${extra.length} such events)`);
    t.equal(streamEvents, acceptedSum, 'sum of accepted over the 200 answers = events in the stream');

    // 7. The shared usage counter caught up with every accepted event once NATS came back.
    const usageKey = `${tenant.slug}.${monthOf(Date.now())}`;
    const expectUsed = acceptedLoad + (probeAccepted.get(tenant.slug)?.length ?? 0);
    let used = -1;
    const synced = await eventually(
      async () => {
        const e = await usage.get(usageKey);
        used = e ? Number(new TextDecoder().decode(e.value)) : -1;
        return used === expectUsed;
      },
      5000,
      50,
    );
    t.not(synced, -1, `the month's usage in KV (${used}) equals the tenant's accepted events (${expectUsed})`);

    // 8. Aggregated and flushed through the outage: the store holds the tenant's accepted events, each once.
    t.not(await eventually(() => drained(prefix, undefined, nats.url), 60_000, 250), -1, 'aggregated and flushed');
    await procs.stop(flusher, 'SIGTERM');
    const store = await Store.open(
      { clickhouse_url: '', data_dir: join(dir, 'store'), events_retention_days: 400 },
      createLogger('silent'),
    );
    t.teardown(() => store.close());
    const storedIds = await select<{ event_id: string; n: string }>(
      store.client,
      'SELECT event_id, count() AS n FROM events WHERE tenant = {tenant:String} GROUP BY event_id',
      {
        tenant: tenant.slug,
      },
    );
    const tenantAccepted = new Set([...answers.flatMap((a) => a.accepted), ...(probeAccepted.get(tenant.slug) ?? [])]);
    t.same(storedIds.filter((r) => Number(r.n) > 1).slice(0, 5), [], 'no event stored twice');
    const storedSet = new Set(storedIds.map((r) => r.event_id));
    t.same([...tenantAccepted].filter((id) => !storedSet.has(id)).slice(0, 5), [], 'every accepted event stored');
    t.equal(
      storedIds.length,
      tenantAccepted.size,
      `the store holds the ${tenantAccepted.size} accepted events and nothing else`,
    );
  });
}
