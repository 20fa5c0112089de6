// One soak (docs/soak.md): the distributed layout under simulated matches while a seeded fault schedule kills and
// restarts its parts. The run is cut into segments, one tenant's match each: at the end of each (the checkpoint) the
// faults pause and that tenant's answers must equal the oracle over exactly the events acknowledged to the client.
// At the end every tenant's answers are compared again, and events, alerts, webhook deliveries and consumers counted.

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import type { HistoryRequest } from '../../src/contracts/history.js';
import { busNames } from '../../src/bus/names.js';
import { createLogger } from '../../src/log.js';
import { Store } from '../../src/store/store.js';
import { poll } from '../host.js';
import { Oracle, type OracleEvent } from '../simulator/oracle.js';
import { provision, type Account } from '../simulator/provision.js';
import { checkAnswers, type Alert } from '../simulator/report.js';
import { Rng } from '../simulator/rng.js';
import { login, simulate } from '../simulator/run.js';
import { Sender, type SendStats } from '../simulator/sender.js';
import { FaultRunner, schedule, type AppliedFault, type Fault } from './faults.js';
import { lateStalls } from './late.js';
import { Layout, sessionRetainMs } from './layout.js';
import { SoakReceiver, type Repeat } from './receiver.js';

export interface SoakOptions {
  /** Traffic time in all, shared by the segments. */
  durationMs: number;
  segments: number;
  /** Faults per minute of traffic, on average. */
  faultRate: number;
  seed: number;
  /** Viewers at each match's peak. */
  viewers: number;
  /** NATS as a cluster of three servers (streams with three replicas, one server killed at a time) instead of one. */
  cluster?: boolean;
  /** Working directory: the layout's stores and NATS. */
  dir: string;
  /** Where the schedule and the report go; none when empty. */
  out: string;
  say: (line: string) => void;
}

export interface SoakResult {
  seed: number;
  faults: Array<Fault & { skipped: boolean }>;
  segments: Array<{ tenant: string; accepted: number; sessions: number; send: SendStats }>;
  /**
   * Late stalls sent for sessions of matches over for longer than the aggregators keep an idle session, and how many
   * of those sessions an aggregator asked the store for (a recall).
   */
  late: { sessions: number; events: number; recalled: number };
  /** Answers unlike the oracle's, at a checkpoint or at the end. */
  answers: string[];
  events: { accepted: number; lost: number; storedTwice: number };
  /** Sessions with acknowledged events and no `session_hours` row. */
  sessionsWithoutRow: string[];
  alerts: { expected: number; lost: string[]; duplicated: string[] };
  webhooks: {
    expected: number;
    undelivered: string[];
    /**
     * Not received, whose last attempt failed and whose next one is due after the run (the retry schedule's 1 h
     * step, say): waiting, not lost. Listed with when; not failed.
     */
    waitingForRetry: string[];
    /** Sent again after a 200 with nothing to explain it: a defect. */
    repeatedAfterSuccess: string[];
    /**
     * Sent again after a 200 because the webhooks process was stopped before it could record the attempt: killed, or
     * stopped while NATS was down (docs/webhooks.md, "Crash safety": at least once). Listed, not failed.
     */
    resentAfterSenderStopped: string[];
  };
  stuckConsumers: string[];
  crashes: string[];
  slowStops: string[];
  ok: boolean;
}

const category = 'content.new_release_detected';

interface Segment {
  account: Account;
  send: SendStats;
  token: string;
  /** The tenant's webhook endpoint, at the soak's receiver. */
  webhookId: string;
  accepted: readonly OracleEvent[];
  oracle: Oracle;
  sessions: number;
  /** When its traffic ended, and the late stalls later sent for its sessions. */
  endedAt: number;
  late: OracleEvent[][] | null;
}

/**
 * A match's sessions get their late stalls once over for this long: an aggregator lets a session go at its first
 * sweep (every 10 minutes of its clock) after the session has been idle for `sessionRetainMs`.
 */
export const lateAfterMs = sessionRetainMs + 11 * 60_000;
/** Sessions of a match that get a late stall. */
const lateSessions = 10;

export async function soak(o: SoakOptions): Promise<SoakResult> {
  const say = o.say;
  const prefix = `soak${o.seed}`;
  const layout = await Layout.start(o.dir, prefix, say, o.cluster ?? false);
  const receiver = await SoakReceiver.start();
  const recalls = await watchRecalls(layout.natsUrl, prefix);
  try {
    const faults = schedule(
      o.seed,
      o.durationMs,
      o.faultRate,
      layout.roles.map((r) => r.name),
      layout.nats.length,
    );
    if (o.out) {
      await mkdir(o.out, { recursive: true });
      await writeFile(
        join(o.out, 'schedule.json'),
        JSON.stringify(
          { seed: o.seed, duration_ms: o.durationMs, fault_rate: o.faultRate, cluster: o.cluster ?? false, faults },
          null,
          1,
        ),
      );
    }
    say(
      `soak seed ${o.seed}${o.cluster ? ', NATS as a cluster of three' : ''}: ${faults.length} faults over ${Math.round(o.durationMs / 1000)} s of traffic in ${o.segments} segments`,
    );
    const runner = new FaultRunner(faults, { layout, failWebhooks: (u) => receiver.fail(u) }, say);
    const api =
      (token: string) =>
      async (path: string, init: RequestInit = {}): Promise<unknown> => {
        const res = await fetch(`${layout.apiUrl}${path}`, {
          ...init,
          signal: AbortSignal.timeout(30_000),
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        });
        if (res.status >= 300) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} ${await res.text()}`);
        return res.json();
      };
    const answers: string[] = [];
    const segments: Segment[] = [];
    const segmentMs = Math.floor(o.durationMs / o.segments);
    const rng = new Rng(o.seed);
    const late = new Map<Segment, Sender>();
    for (let k = 0; k < o.segments; k++) {
      // Matches over long enough get their late stalls now, sent while this one plays and the faults go on.
      for (const s of segments) {
        if (s.late !== null || Date.now() - s.endedAt < lateAfterMs) continue;
        s.late = lateStalls(s.accepted, rng, lateSessions);
        const sender = new Sender({
          ingestUrls: layout.ingestUrls,
          apiKey: s.account.apiKey,
          concurrency: 4,
          maxAttempts: 10_000,
          retryBeacons: true,
        });
        late.set(s, sender);
        for (const events of s.late) await sender.send({ via: 'events', events });
        say(
          `late stalls for ${s.late.length} sessions of ${s.account.tenant}, over for ${Math.round((Date.now() - s.endedAt) / 60_000)} min`,
        );
      }
      const account = await provision(`soak-${k}`, `Soak match ${k}`, layout.cliEnv);
      const token = await login(layout.apiUrl, account.email, account.password);
      const hook = (await api(token)('/v1/webhooks', {
        method: 'POST',
        body: JSON.stringify({ url: `${receiver.url}/${account.tenant}`, categories: [category] }),
      })) as { id: string };
      runner.resume();
      const r = await simulate({
        ingestUrls: layout.ingestUrls,
        apiUrl: layout.apiUrl,
        ...account,
        viewers: o.viewers,
        durationMs: segmentMs,
        speed: 1,
        seed: o.seed * 1000 + k,
        incidents: [],
        concurrency: 16,
        settleMs: 90_000,
        out: '',
        maxAttempts: 10_000,
        retryBeacons: true,
        onSent: async () => {
          for (const sender of late.values()) await sender.drain();
          await runner.pause();
        },
      });
      for (const a of r.answers)
        if (!a.exact)
          answers.push(`checkpoint ${k} (${account.tenant}) ${a.answer}: ${a.differences.slice(0, 5).join('; ')}`);
      const retries =
        Object.entries(r.send.retries)
          .map(([why, n]) => `${why} x${n}`)
          .join(', ') || 'none';
      say(
        `checkpoint ${k}: ${account.tenant}, ${r.events} events acknowledged (retries: ${retries}), ${r.answers.filter((a) => a.exact).length}/${r.answers.length} answers exact`,
      );
      for (const a of r.answers) if (!a.exact) say(`  ${a.answer} differs: ${a.differences.slice(0, 3).join('; ')}`);
      segments.push({
        account,
        token,
        webhookId: hook.id,
        accepted: r.accepted,
        oracle: r.oracle,
        sessions: r.sessions,
        send: r.send,
        endedAt: Date.now(),
        late: null,
      });
    }
    // What the late senders had acknowledged is part of their match from now on (as with every request, the oracle
    // counts what was acknowledged).
    for (const [s, sender] of late) {
      s.accepted = [...s.accepted, ...sender.accepted];
      s.oracle = new Oracle(s.accepted);
    }

    say('traffic over: comparing every tenant again, then alerts, deliveries, consumers and the store');
    for (const s of segments) {
      for (const a of await checkAnswers(api(s.token), s.oracle, s.account.tenant))
        if (!a.exact) answers.push(`end (${s.account.tenant}) ${a.answer}: ${a.differences.slice(0, 5).join('; ')}`);
    }
    const alerts = await countAlerts(segments, api);
    const webhooks = await countDeliveries(segments, receiver, runner.done, api);
    // A retry parked until its next attempt is an unacknowledged message of the retry consumer, not a stuck one.
    const stuckConsumers = await stuck(layout, webhooks.waitingForRetry.length);
    // The store is the flush process's: stopped (drained) so this process can open it and count rows.
    await layout.stop('flush-api', 'SIGTERM');
    const { events, sessionsWithoutRow } = await countRows(join(o.dir, 'store'), segments);
    const result: SoakResult = {
      seed: o.seed,
      faults: runner.done,
      segments: segments.map((s) => ({
        tenant: s.account.tenant,
        accepted: s.accepted.length,
        sessions: s.sessions,
        send: s.send,
      })),
      late: lateCounts(segments, recalls.asked),
      answers,
      events,
      sessionsWithoutRow,
      alerts,
      webhooks,
      stuckConsumers,
      crashes: layout.crashes,
      slowStops: layout.slowStops,
      ok: false,
    };
    result.ok =
      answers.length === 0 &&
      events.lost === 0 &&
      events.storedTwice === 0 &&
      sessionsWithoutRow.length === 0 &&
      alerts.lost.length + alerts.duplicated.length === 0 &&
      webhooks.undelivered.length + webhooks.repeatedAfterSuccess.length === 0 &&
      stuckConsumers.length === 0 &&
      layout.crashes.length + layout.slowStops.length === 0;
    if (o.out) {
      await writeFile(join(o.out, 'report.json'), JSON.stringify(result, null, 1));
      // What each role's latest process said last, to read beside a failure.
      await writeFile(
        join(o.out, 'logs.txt'),
        layout.roles.map((r) => `--- ${r.name}\n${layout.log(r.name)}`).join('\n'),
      );
    }
    return result;
  } finally {
    await recalls.close();
    await layout.close();
    await receiver.close();
  }
}

/** The sessions aggregators ask the flush role for (`tenant session`), heard on the request subject. */
async function watchRecalls(natsUrl: string, prefix: string): Promise<{ asked: Set<string>; close(): Promise<void> }> {
  const nc: NatsConnection = await connect({ servers: natsUrl, maxReconnectAttempts: -1 });
  const asked = new Set<string>();
  nc.subscribe(busNames(prefix).historySubject, {
    callback: (err, m) => {
      if (err) return;
      const r = m.json<HistoryRequest>();
      for (const session of r.sessions) asked.add(`${r.tenant} ${session}`);
    },
  });
  return { asked, close: () => nc.close() };
}

function lateCounts(segments: readonly Segment[], asked: ReadonlySet<string>): SoakResult['late'] {
  const pairs = segments.flatMap((s) => s.late ?? []);
  return {
    sessions: pairs.length,
    events: pairs.reduce((n, p) => n + p.length, 0),
    recalled: pairs.filter((p) => asked.has(`${p[0]!.tenant} ${p[0]!.session_id}`)).length,
  };
}

/** What a tenant's first plays should raise: one new-release alert per content id it played. */
function releases(s: Segment): string[] {
  return [
    ...new Set(s.accepted.filter((e) => e.event_type === 'play_start' && e.content_id).map((e) => e.content_id!)),
  ].sort();
}

async function countAlerts(
  segments: readonly Segment[],
  api: (token: string) => (path: string) => Promise<unknown>,
): Promise<SoakResult['alerts']> {
  const lost: string[] = [];
  const duplicated: string[] = [];
  let expected = 0;
  for (const s of segments) {
    const want = releases(s);
    expected += want.length;
    let raised: string[] = [];
    await poll(
      async () => {
        const list = (await api(s.token)('/v1/analytics/alerts?limit=200')) as Alert[];
        raised = list.filter((a) => a.category === category).map((a) => String(a.data.content_id));
        return want.every((c) => raised.includes(c));
      },
      30_000,
      500,
    );
    for (const c of want) {
      const n = raised.filter((x) => x === c).length;
      if (n === 0) lost.push(`${s.account.tenant}/${c}`);
      if (n > 1) duplicated.push(`${s.account.tenant}/${c} x${n}`);
    }
  }
  return { expected, lost, duplicated };
}

/** A stopped process has this long to write down the attempts under way (src/webhooks/service.ts, untilWritten). */
const stoppingWriteMs = 10_000;

/**
 * Why a delivery was sent again after its 200, if a fault explains it: the webhooks process killed after the 200 and
 * before the attempt could be recorded, or stopped (SIGTERM) then while a nats-server was down for its 10 s of
 * writing; null otherwise. An attempt is recorded within a second of its 200 while NATS answers; through an outage,
 * within a second of NATS being back (a killed server is down for `down`, then takes a few seconds on its store).
 */
export function senderStopped(r: Repeat, faults: readonly AppliedFault[]): string | null {
  const outages = faults
    .filter((f) => !f.skipped && f.kind === 'nats')
    .map((f) => [f.appliedAt, f.appliedAt + f.down + 5000] as const)
    .sort((a, b) => a[0] - b[0]);
  let recordedBy = r.succeededAt + 1000;
  for (const [from, to] of outages)
    if (from <= recordedBy && to > r.succeededAt) recordedBy = Math.max(recordedBy, to + 1000);
  const natsDown = (from: number, to: number): boolean => outages.some(([a, b]) => a < to && b > from);
  for (const f of faults) {
    if (f.skipped || (f.kind !== 'kill' && f.kind !== 'term') || f.role !== 'webhooks') continue;
    if (f.appliedAt <= r.succeededAt || f.appliedAt >= Math.min(recordedBy, r.repeatedAt)) continue;
    const after = `${((f.appliedAt - r.succeededAt) / 1000).toFixed(1)} s after its 200`;
    if (f.kind === 'kill') return `${r.delivery}: kill -9 of webhooks ${after}`;
    if (natsDown(f.appliedAt, f.appliedAt + stoppingWriteMs))
      return `${r.delivery}: SIGTERM of webhooks ${after}, with a nats-server down`;
  }
  return null;
}

/** The attempts of a delivery, as the API's delivery log shows them (newest first). */
export interface LoggedAttempt {
  attempt: number;
  status: string;
  created_at: string;
  next_attempt_at: string | null;
  request_body: string;
}

/** Why an undelivered delivery is waiting for its next attempt, from its logged attempts; null if it is not. */
export function waitingWhy(key: string, attempts: readonly LoggedAttempt[], now: number): string | null {
  const last = attempts[0];
  if (!last || last.status !== 'failed' || last.next_attempt_at === null) return null;
  const next = Date.parse(last.next_attempt_at);
  if (!(next > now)) return null;
  return `${key}: attempt ${last.attempt} failed at ${last.created_at}, the next is due at ${last.next_attempt_at}`;
}

async function countDeliveries(
  segments: readonly Segment[],
  receiver: SoakReceiver,
  faults: readonly AppliedFault[],
  api: (token: string) => (path: string) => Promise<unknown>,
): Promise<SoakResult['webhooks']> {
  const want = segments.flatMap((s) => releases(s).map((c) => `${s.account.tenant}/${c}`));
  const delivered = (): Set<string> =>
    new Set(
      receiver
        .receipts()
        .filter((r) => r.answered === 200 && r.type === category)
        .map((r) => `${r.tenant}/${String(r.data.content_id)}`),
    );
  // A delivery that failed in an outage is retried 30 s later, and 2 min after that if it failed again.
  await poll(async () => want.every((w) => delivered().has(w)), 200_000, 500);
  const got = delivered();
  const repeats = receiver.repeatedAfterSuccess();
  const waiting: string[] = [];
  const undelivered: string[] = [];
  for (const s of segments) {
    const missing = releases(s).filter((c) => !got.has(`${s.account.tenant}/${c}`));
    if (missing.length === 0) continue;
    // The endpoint's last 200 attempts, newest first: far more than a soak's deliveries to it.
    const log = (await api(s.token)(`/v1/webhooks/${s.webhookId}/deliveries?limit=200`)) as LoggedAttempt[];
    for (const c of missing) {
      const key = `${s.account.tenant}/${c}`;
      const mine = log.filter((a) => {
        const body = JSON.parse(a.request_body) as { type?: string; data?: { content_id?: string } };
        return body.type === category && body.data?.content_id === c;
      });
      const why = waitingWhy(key, mine, Date.now());
      if (why) waiting.push(why);
      else undelivered.push(key);
    }
  }
  const explained = repeats.map((r) => ({ delivery: r.delivery, why: senderStopped(r, faults) }));
  return {
    expected: want.length,
    undelivered,
    waitingForRetry: waiting,
    repeatedAfterSuccess: explained.filter((r) => r.why === null).map((r) => r.delivery),
    resentAfterSenderStopped: explained.flatMap((r) => (r.why === null ? [] : [r.why])),
  };
}

/**
 * Durable consumers of the soak's streams with messages still pending a minute after the traffic ended; `parked`
 * unacknowledged messages of the retry consumer are deliveries waiting for their next attempt.
 */
async function stuck(layout: Layout, parked: number): Promise<string[]> {
  const nc = await connect({ servers: layout.natsUrl });
  try {
    const jsm = await nc.jetstreamManager();
    let behind: string[] = [];
    await poll(
      async () => {
        behind = [];
        for (const stream of await jsm.streams.list().next()) {
          if (!stream.config.name.startsWith(layout.prefix)) continue;
          for (const c of await jsm.consumers.list(stream.config.name).next()) {
            if (!c.config.durable_name) continue;
            const pending = c.num_pending + c.num_ack_pending - (c.name === 'webhooks-retry' ? parked : 0);
            if (pending > 0)
              behind.push(
                `${stream.config.name}/${c.name}: ${c.num_pending} pending, ${c.num_ack_pending} unacknowledged`,
              );
          }
        }
        return behind.length === 0;
      },
      60_000,
      500,
    );
    return behind;
  } finally {
    await nc.close();
  }
}

/** Acknowledged events missing from the `events` table or stored twice, and sessions without a `session_hours` row. */
async function countRows(
  dataDir: string,
  segments: readonly Segment[],
): Promise<{ events: SoakResult['events']; sessionsWithoutRow: string[] }> {
  const store = await Store.open(
    { clickhouse_url: '', data_dir: dataDir, events_retention_days: 400 },
    createLogger('silent'),
  );
  try {
    const tenants = segments.map((s) => s.account.tenant);
    const rows = async <T>(query: string): Promise<T[]> =>
      (await store.client.query({ query, query_params: { tenants }, format: 'JSONEachRow' })).json<T>();
    const stored = new Map<string, number>();
    for (const r of await rows<{ tenant: string; event_id: string; n: string }>(
      'SELECT tenant, event_id, count() AS n FROM events WHERE tenant IN {tenants:Array(String)} GROUP BY tenant, event_id',
    )) {
      stored.set(`${r.tenant} ${r.event_id}`, Number(r.n));
    }
    const sessions = new Set(
      (
        await rows<{ tenant: string; session_id: string }>(
          'SELECT DISTINCT tenant, session_id FROM session_hours WHERE tenant IN {tenants:Array(String)}',
        )
      ).map((r) => `${r.tenant} ${r.session_id}`),
    );
    let accepted = 0;
    let lost = 0;
    let storedTwice = 0;
    const sessionsWithoutRow = new Set<string>();
    for (const s of segments) {
      for (const e of s.accepted) {
        accepted++;
        const n = stored.get(`${e.tenant} ${e.event_id}`) ?? 0;
        if (n === 0) lost++;
        if (n > 1) storedTwice++;
        if (e.session_id !== undefined && !sessions.has(`${e.tenant} ${e.session_id}`))
          sessionsWithoutRow.add(`${e.tenant} ${e.session_id}`);
      }
    }
    return { events: { accepted, lost, storedTwice }, sessionsWithoutRow: [...sessionsWithoutRow] };
  } finally {
    await store.close();
  }
}
