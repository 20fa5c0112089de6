// The data and the SQL of the query benchmark (bench/query.ts):
//
// 1. generateEvents: a month of a live cricket tournament written straight into `events` with INSERT … SELECT FROM
//    numbers(…), a chunk of sessions per insert, so 100M events load in minutes.
// 2. deriveSnapshots: the pipelines' snapshot tables computed from those events with SQL that follows
//    pipelines/*.ts and docs/metrics.md (same ordering, state machine, 30 s cap and timeout, per-second concurrency,
//    per-minute rows), written fully merged (one row per key). Not checked number for number against the pipelines;
//    what matters here is that row counts and cardinalities are those the live system would have.
// 3. raw*: each analytics answer computed from `events` alone, with the definitions of docs/metrics.md.

import type { ClickHouseClient } from '@clickhouse/client';
import { subscriptionUsers } from '../pipelines/billing/pipeline.js';
import { viewerWindows } from '../pipelines/viewers/pipeline.js';
import type {
  ConcurrencySeries,
  Interval,
  DeviceItem,
  GeoItem,
  Overview,
  Range,
  TopContentItem,
} from '../src/store/queries/index.js';

export const benchTenant = 'bench';
/** Share of the sessions (and subscribers) of each tenant: the bench tenant holds most of them. */
const tenants: ReadonlyArray<readonly [string, number]> = [
  [benchTenant, 0.9],
  ['sports-two', 0.06],
  ['sports-three', 0.04],
];

/** Region (Indian state), its CDN pop, and its weight. '' is an event whose IP had no region. */
const regions: ReadonlyArray<readonly [string, string, number]> = [
  ['Maharashtra', 'bom1', 14],
  ['Uttar Pradesh', 'del1', 12],
  ['Karnataka', 'blr1', 9],
  ['Tamil Nadu', 'maa1', 9],
  ['Delhi', 'del1', 8],
  ['West Bengal', 'ccu1', 7],
  ['Gujarat', 'bom2', 7],
  ['Telangana', 'hyd1', 6],
  ['Andhra Pradesh', 'hyd1', 5],
  ['Kerala', 'maa1', 5],
  ['Rajasthan', 'del2', 4],
  ['Madhya Pradesh', 'bom2', 3],
  ['Punjab', 'del2', 3],
  ['Haryana', 'del2', 3],
  ['Bihar', 'ccu1', 2],
  ['Odisha', 'ccu1', 1.5],
  ['Assam', 'ccu1', 1],
  ['Jharkhand', 'ccu1', 1],
  ['Goa', 'bom1', 0.5],
  ['Chhattisgarh', 'hyd1', 0.5],
  ['', '', 1],
];

export const contents = 2000;
const day = 86_400_000;
const subscriptionKinds = `('subscription_started', 'subscription_renewed', 'subscription_cancelled', 'subscription_expired')`;
const billingKinds = `('subscription_started', 'subscription_renewed', 'subscription_cancelled', 'subscription_expired', 'payment_succeeded', 'payment_failed')`;
const sessionTypes = `('play_start', 'first_frame', 'heartbeat', 'pause', 'resume', 'seek_start', 'seek_end', 'rebuffer_start', 'rebuffer_end', 'bitrate_change', 'error', 'ended', 'session_end')`;

/**
 * Settings of every INSERT … SELECT here. An embedded ClickHouse session keeps the settings of earlier queries, and
 * Store.open's migrations insert with `insert_deduplication_token`: inherited, that token makes the second insert
 * into a table drop every block numbered like one of the first's (53% of the events were lost that way).
 * insert_deduplicate = 0 alone does not stop token de-duplication; an empty token does.
 */
const noDedup = `insert_deduplicate = 0, insert_deduplication_token = ''`;

const list = (xs: readonly string[]): string => `[${xs.map((x) => `'${x}'`).join(', ')}]`;
const cumulative = (weights: readonly number[]): string => {
  const total = weights.reduce((s, w) => s + w, 0);
  let acc = 0;
  return `[${weights.map((w, i) => (i === weights.length - 1 ? '1.0' : ((acc += w) / total).toFixed(6))).join(', ')}]`;
};
/** A uniform number in [0, 1) from a key column and a salt: the same session always gets the same draws. */
const u = (key: string, salt: number): string => `(cityHash64(${key}, ${salt}) % 1000000007) / 1000000007.0`;

export interface Plan {
  /** Sessions to generate (all tenants). */
  sessions: number;
  /** Pool of logged-in user ids, and of anonymous (device) ids. */
  users: number;
  anons: number;
  /** Events end at this instant (a live month ending now); midnight UTC 29 days before is its first day. */
  nowMs: number;
}

/**
 * One row per session: its tenant, start, attributes, and `evs`, its events as (offset ms, type, position step).
 * A session is a play_start, a first_frame after the startup time, a heartbeat every 10 s of watching, and now and
 * then a rebuffering, a pause and resume, a bitrate change, a non-fatal error; it ends with ended, session_end, a
 * fatal error, or nothing (abandoned: it times out). Starts spread over 30 days, more on later days, with an evening
 * (IST) match peak; content popularity is skewed (a few live matches draw most viewers).
 */
function sessionRows(plan: Plan, first: number, count: number): string {
  const baseS = Math.floor(plan.nowMs / day) * 86_400 - 29 * 86_400;
  const k = 'number';
  // Offset (ms after the play_start) of a point `x` heartbeats into the watching, after any pause and stall before it.
  const off = (x: string): string =>
    `(ff + toInt64(floor((${x}) * 10000)) + if(has_pause AND (${x}) > pause_at + 0.5, pause_len, 0) + if(has_reb AND (${x}) > reb_at + 0.5, reb_len, 0))`;
  return `SELECT
    ${k} AS k,
    ${u(k, 1)} AS u_tenant,
    multiIf(${tenants
      .slice(0, -1)
      .map((_, i) => `u_tenant < ${tenants.slice(0, i + 1).reduce((s, t) => s + t[1], 0)}, '${tenants[i]![0]}'`)
      .join(', ')}, '${tenants[tenants.length - 1]![0]}') AS tenant,
    toInt64(floor(30 * sqrt(${u(k, 2)}))) AS day_n,
    toInt64(if(${u(k, 3)} < 0.55, 14 * 3600 + floor((${u(k, 4)} + ${u(k, 5)}) / 2 * 4 * 3600), floor(${u(k, 4)} * 86400))) AS tod,
    (${baseS} + least(day_n, 29) * 86400 + tod) * 1000 + toInt64(floor(${u(k, 6)} * 1000)) AS start_ms,
    toInt64(least(14400, floor(-log(${u(k, 7)} + 1e-9) * 600))) AS watch_s,
    intDiv(watch_s, 10) AS n_hb,
    toInt64(300 + least(29700, floor(-log(${u(k, 8)} + 1e-9) * 900))) AS ff,
    lower(concat(hex(cityHash64(${k}, 100)), hex(cityHash64(${k}, 101)))) AS session_id,
    toUInt64(floor(${contents} * pow(${u(k, 11)}, 3))) AS ci,
    concat('c', leftPad(toString(ci), 4, '0')) AS content_id,
    ci < 40 AS is_live,
    multiIf(is_live, 'live', ci % 3 = 0, 'movie', ci % 3 = 1, 'episode', 'highlights') AS content_type,
    if(is_live, concat('Live: match ', toString(ci + 1)), concat('Title ', toString(ci))) AS content_title,
    if(is_live, 28800, 300 + cityHash64(ci) % 6900) AS duration_sec,
    if(is_live, toInt64(floor(${u(k, 23)} * 20000)), 0) AS start_pos,
    ${u(k, 9)} AS u_dev,
    multiIf(u_dev < 0.6, 'mobile', u_dev < 0.78, 'desktop', u_dev < 0.93, 'tv', 'tablet') AS device,
    multiIf(device = 'mobile', if(${u(k, 24)} < 0.8, 'Android', 'iOS'), device = 'desktop', if(${u(k, 24)} < 0.7, 'Windows', 'macOS'), device = 'tv', 'Android TV', 'iPadOS') AS os,
    if(device = 'desktop', ${list(['Chrome', 'Chrome', 'Edge', 'Safari', 'Firefox'])}[1 + cityHash64(${k}, 28) % 5], '') AS browser,
    multiIf(os IN ('iOS', 'iPadOS'), 'avplayer', device = 'desktop', 'shaka', 'exoplayer') AS player,
    concat(os, if(browser = '', ' app', concat(' ', browser)), ' darshak-player') AS user_agent,
    ${list(['5.12.0', '5.12.1', '5.13.0', '5.14.2'])}[1 + cityHash64(${k}, 25) % 4] AS app_version,
    if(${u(k, 26)} < 0.6, 'akamai', 'cloudfront') AS cdn,
    arrayFirstIndex(c -> c >= ${u(k, 10)}, ${cumulative(regions.map((r) => r[2]))}) AS ri,
    ${list(regions.map((r) => r[0]))}[ri] AS region,
    ${list(regions.map((r) => r[1]))}[ri] AS pop,
    if(${u(k, 12)} < 0.8, concat('u', toString(cityHash64(${k}, 13) % ${plan.users})), '') AS user_id,
    concat('a', lower(hex(cityHash64(${k}, 14) % ${plan.anons}))) AS anonymous_id,
    n_hb >= 3 AND ${u(k, 15)} < 0.35 AS has_reb,
    toInt64(1 + floor(${u(k, 16)} * greatest(n_hb - 1, 1))) AS reb_at,
    toInt64(500 + least(60000, floor(-log(${u(k, 17)} + 1e-9) * 3000))) AS reb_len,
    n_hb >= 4 AND ${u(k, 18)} < 0.15 AS has_pause,
    toInt64(floor(${u(k, 19)} * n_hb)) AS pause_at,
    toInt64(5000 + floor(${u(k, 20)} * 600000)) AS pause_len,
    n_hb >= 2 AND ${u(k, 21)} < 0.4 AS has_bitrate,
    n_hb >= 3 AND ${u(k, 27)} < 0.03 AS has_error,
    ${u(k, 22)} AS u_end,
    multiIf(u_end < 0.5, 'ended', u_end < 0.9, 'session_end', u_end < 0.91, 'error_fatal', '') AS end_kind,
    arrayConcat(
      [(toInt64(0), 'play_start', toFloat64(0)), (ff, 'first_frame', toFloat64(0))],
      arrayMap(i -> (${off('i')}, 'heartbeat', toFloat64(i)), range(1, toUInt64(n_hb) + 1)),
      if(has_reb, [(${off('reb_at + 0.4')}, 'rebuffer_start', reb_at + 0.4), (${off('reb_at + 0.4')} + reb_len, 'rebuffer_end', reb_at + 0.4)], []),
      if(has_pause, [(${off('pause_at + 0.5')}, 'pause', pause_at + 0.5), (${off('pause_at + 0.5')} + pause_len, 'resume', pause_at + 0.5)], []),
      if(has_bitrate, [(${off('1.5')}, 'bitrate_change', toFloat64(1.5))], []),
      if(has_error, [(${off('2.7')}, 'error', toFloat64(2.7))], []),
      if(end_kind != '', [(${off('n_hb + 0.5')}, end_kind, n_hb + 0.5)], [])
    ) AS evs
  FROM numbers(${first}, ${count})`;
}

/** Mean stored events per generated session (events after `nowMs` are not stored: those sessions are still live). */
export async function eventsPerSession(client: ClickHouseClient, plan: Plan): Promise<number> {
  const sample = 200_000;
  const [row] = await rows<{ n: string }>(
    client,
    `SELECT sum(arrayCount(e -> start_ms + e.1 <= ${plan.nowMs}, evs)) AS n FROM (${sessionRows(plan, 0, sample)})`,
  );
  return Number(row!.n) / sample;
}

/** The number of events the sessions [0, plan.sessions) make, to check that a load stored them all. */
export async function sessionEvents(client: ClickHouseClient, plan: Plan): Promise<number> {
  const [row] = await rows<{ n: string }>(
    client,
    `SELECT sum(arrayCount(e -> start_ms + e.1 <= ${plan.nowMs}, evs)) AS n FROM (${sessionRows(plan, 0, plan.sessions)}) SETTINGS max_block_size = 4096`,
  );
  return Number(row!.n);
}

/** Insert the sessions [first, first + count) as events. */
export async function insertSessions(
  client: ClickHouseClient,
  plan: Plan,
  first: number,
  count: number,
): Promise<void> {
  await client.command({
    query: `INSERT INTO events (tenant, env, event_type, ts, client_ts, received_at, event_id, anonymous_id, user_id, session_id,
        content_id, content_type, content_title, position_sec, bitrate_kbps, country, region, device, app_version, os, browser,
        player, cdn, pop, user_agent, properties, ingest_seq, ingest_index)
      SETTINGS ${noDedup}
      SELECT tenant, 'production', if(e.2 = 'error_fatal', 'error', e.2) AS type,
        fromUnixTimestamp64Milli(start_ms + e.1, 'UTC') AS t, t,
        fromUnixTimestamp64Milli(start_ms + e.1 + 40 + toInt64(cityHash64(k, e.1) % 1500), 'UTC'),
        toString(generateUUIDv4()), anonymous_id, user_id, session_id, content_id,
        if(e.2 = 'play_start', content_type, ''), if(e.2 = 'play_start', content_title, ''),
        if(e.2 IN ('play_start', 'first_frame'), NULL, toUInt32(start_pos + floor(e.3 * 10))),
        if(e.2 IN ('heartbeat', 'bitrate_change'), toUInt32(multiIf(device = 'tv', 6000, device = 'desktop', 4500, 2500) - (cityHash64(k, e.1) % 3) * 700), NULL),
        if(region = '', '', 'IN'), region, device, app_version, os, browser, player, cdn, pop, user_agent,
        multiIf(e.2 = 'play_start', concat('{"duration_sec":', toString(duration_sec), '}'),
                e.2 = 'error_fatal', '{"fatal":true,"code":"MEDIA_ERR_DECODE"}',
                e.2 = 'error', '{"fatal":false,"code":"NETWORK_RETRY"}', '{}'),
        k, toUInt32(idx - 1)
      FROM (${sessionRows(plan, first, count)})
      ARRAY JOIN evs AS e, arrayEnumerate(evs) AS idx
      WHERE start_ms + e.1 <= ${plan.nowMs}
      SETTINGS max_block_size = 4096`,
  });
}

/**
 * Subscriptions and payments: about a third of the user pool subscribes at a random time in the last 60 days, pays,
 * and after 30 days renews and pays again, or fails to pay and expires, or cancels before and expires. Plus one
 * content_published per content and tenant (three in four of the contents; the others are known from play_starts).
 */
export async function insertBillingAndCatalogue(client: ClickHouseClient, plan: Plan): Promise<void> {
  const j = 'number';
  const month = 30 * day;
  await client.command({
    query: `INSERT INTO events (tenant, env, event_type, ts, client_ts, received_at, event_id, user_id, properties, country, ingest_seq, ingest_index)
      SETTINGS ${noDedup}
      SELECT tenant, 'production', e.1, fromUnixTimestamp64Milli(e.2, 'UTC') AS t, t, t, toString(generateUUIDv4()), user_id,
        if(e.3 > 0, concat('{"amount_inr":', toString(e.3), ',"plan":"', plan, '"}'), concat('{"plan":"', plan, '"}')), 'IN', j, 0
      FROM (
        SELECT ${j} AS j, ${u(j, 1)} AS u_tenant,
          multiIf(${tenants
            .slice(0, -1)
            .map((_, i) => `u_tenant < ${tenants.slice(0, i + 1).reduce((s, t) => s + t[1], 0)}, '${tenants[i]![0]}'`)
            .join(', ')}, '${tenants[tenants.length - 1]![0]}') AS tenant,
          concat('u', toString(${j})) AS user_id,
          1 + cityHash64(${j}, 32) % 4 AS pi,
          ${list(['mobile', 'premium', 'premium', 'family'])}[pi] AS plan,
          [149., 299., 299., 499.][pi] AS price,
          ${plan.nowMs} - toInt64(floor(${u(j, 33)} * ${2 * month})) AS st,
          ${u(j, 34)} < 0.08 AS cancelled,
          st + toInt64(floor(${u(j, 35)} * ${month})) AS cancel_at,
          ${u(j, 36)} < 0.05 AS fails,
          arrayConcat([('subscription_started', st, 0.), ('payment_succeeded', st + 2000, price)],
            multiIf(cancelled, [('subscription_cancelled', cancel_at, 0.), ('subscription_expired', st + ${month}, 0.)],
                    fails, [('payment_failed', st + ${month} - 3600000, price), ('subscription_expired', st + ${month}, 0.)],
                    [('subscription_renewed', st + ${month}, 0.), ('payment_succeeded', st + ${month} + 2000, price)])) AS evs
        FROM numbers(${plan.users}) WHERE ${u(j, 31)} < 0.35
      ) ARRAY JOIN evs AS e
      WHERE e.2 <= ${plan.nowMs}`,
  });
  const publishedAt = Math.floor(plan.nowMs / day) * day - 40 * day;
  await client.command({
    query: `INSERT INTO events (tenant, env, event_type, ts, client_ts, received_at, event_id, content_id, content_type, content_title, properties, ingest_seq, ingest_index)
      SETTINGS ${noDedup}
      SELECT tenant, 'production', 'content_published', fromUnixTimestamp64Milli(toInt64(${publishedAt} + ci * 300000), 'UTC') AS t, t, t,
        toString(generateUUIDv4()), concat('c', leftPad(toString(ci), 4, '0')),
        multiIf(ci < 40, 'live', ci % 3 = 0, 'movie', ci % 3 = 1, 'episode', 'highlights'),
        if(ci < 40, concat('Live: match ', toString(ci + 1)), concat('Title ', toString(ci))),
        concat('{"duration_sec":', toString(if(ci < 40, 28800, 300 + cityHash64(ci) % 6900)), '}'), ci, 0
      FROM (SELECT number AS ci FROM numbers(${contents}) WHERE cityHash64(number) % 4 != 0)
      ARRAY JOIN ${list(tenants.map((t) => t[0]))} AS tenant`,
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Sessions from events (docs/metrics.md "Sessions")

/** Rank of a session event for equal timestamps; a fatal error has its own. */
const rankSql = `multiIf(event_type = 'play_start', 0, event_type = 'first_frame', 1, event_type = 'resume', 2, event_type = 'seek_start', 3,
  event_type = 'seek_end', 4, event_type = 'rebuffer_start', 5, event_type = 'rebuffer_end', 6, event_type = 'heartbeat', 7,
  event_type = 'bitrate_change', 8, event_type = 'error', if(JSONExtractBool(properties, 'fatal'), 11, 9), event_type = 'pause', 10,
  event_type = 'ended', 12, 13)`;

/**
 * One row per session of the events matching `where`: its attributes, and its timeline as arrays in the documented
 * order (ts, then rank: events packed as ts × 16 + rank and sorted). The state after each event (st: 0 none,
 * 1 starting, 2 playing, 3 rebuffering, 4 paused, 5 closed) is the state set by the latest event that sets one by
 * itself, except after a heartbeat, or a state-keeping event after a heartbeat, where it is rebuffering if that
 * latest setter was rebuffer_start and playing otherwise. Derived arrays, each computed only when read:
 * - t2, wms, reb: for each event after the first, its ts, the watch time attributed to it (min(gap, 30 s) when the
 *   state before it was playing or rebuffering) and whether that time was rebuffering;
 * - segs: for each event whose state is active, the whole seconds [first, end) at which it counts as concurrent
 *   (t·1000 ≥ ts, t·1000 ≤ ts + 30 s, t·1000 < next event's ts).
 */
export function sessionsSql(where: string): string {
  return `SELECT *,
      arrayMap(x -> intDiv(x, 16), tl) AS ts_a,
      arrayMap(x -> toUInt8(x % 16), tl) AS r_a,
      arrayMap(r -> toUInt8(multiIf(r = 0, 1, r IN (1, 2, 4, 6), 2, r = 5, 3, r = 10, 4, r >= 11, 5, 0)), r_a) AS code,
      arrayFill(x -> x != 0, code) AS l_code,
      arrayFill(x -> x != 0, arrayMap((c, i) -> if(c != 0, i, 0), code, arrayEnumerate(code))) AS l_idx,
      arrayFill(x -> x != 0, arrayMap((r, i) -> if(r = 7, i, 0), r_a, arrayEnumerate(r_a))) AS h_idx,
      arrayMap((l, a, b) -> toUInt8(if(b > a, if(l = 3, 3, 2), l)), l_code, l_idx, h_idx) AS st,
      arrayPopFront(ts_a) AS t2,
      arrayMap((s, a, b) -> if(s = 2 OR s = 3, least(b - a, 30000), 0), arrayPopBack(st), arrayPopBack(ts_a), t2) AS wms,
      arrayMap(s -> s = 3, arrayPopBack(st)) AS reb,
      arrayMap((s, a, n) -> if(s >= 1 AND s <= 3, (intDiv(a + 999, 1000), intDiv(least(a + 30001, n) + 999, 1000)), (toInt64(0), toInt64(0))),
        st, ts_a, arrayPushBack(t2, toInt64(9000000000000000))) AS segs,
      arrayFirstIndex(r -> r = 0, r_a) AS ps_i,
      arrayFirstIndex((r, i) -> r = 1 AND i > ps_i, r_a, arrayEnumerate(r_a)) AS ff_i,
      if(ps_i > 0, ts_a[ps_i], NULL) AS started_at,
      if(ps_i > 0 AND ff_i > 0, ts_a[ff_i], NULL) AS startup_at,
      startup_at - started_at AS startup_ms,
      if(has(r_a, 11), ts_a[indexOf(r_a, 11)], NULL) AS fatal_at,
      ts_a[1] AS first_ts,
      ts_a[-1] AS last_ts
    FROM (
      SELECT tenant, session_id,
        arraySort(groupArray(o)) AS tl,
        length(tl) AS events,
        argMinIf(content_id, o, content_id != '') AS content_id,
        argMinIf(region, o, region != '') AS region,
        argMinIf(country, o, country != '') AS country,
        argMinIf(pop, o, pop != '') AS pop,
        argMinIf(device, o, device != '') AS device,
        if(countIf(user_id != '') > 0, argMinIf(user_id, o, user_id != ''), argMinIf(anonymous_id, o, anonymous_id != '')) AS viewer,
        toFloat64(max(coalesce(position_sec, 0))) AS furthest_sec,
        if(countIf(dur > 0) > 0, argMinIf(dur, o, dur > 0), NULL) AS duration_sec,
        toUInt8(countIf(r = 12) > 0) AS ended
      FROM (
        SELECT tenant, session_id, content_id, region, country, pop, device, user_id, anonymous_id, position_sec,
          ${rankSql} AS r,
          toUnixTimestamp64Milli(ts) * 16 + r AS o,
          if(r = 0, JSONExtractFloat(properties, 'duration_sec'), 0) AS dur
        FROM events
        WHERE event_type IN ${sessionTypes} AND session_id != '' AND (${where})
      )
      GROUP BY tenant, session_id
    )`;
}

// ---------------------------------------------------------------------------------------------------------------
// Snapshot tables from events

const minute = (msCol: string): string => `toDateTime(intDiv(${msCol}, 60000) * 60, 'UTC')`;

/**
 * Fill the snapshot tables from `events`, a `part` of the sessions at a time (by a hash of session_id). Sum tables
 * and session_hours are then merged (OPTIMIZE … FINAL) so each key holds one row, as the live tables do once ClickHouse
 * has merged.
 */
export async function deriveSnapshots(
  client: ClickHouseClient,
  parts: number,
  progress: (step: string) => void,
): Promise<void> {
  const run = (query: string): Promise<unknown> => client.command({ query });
  await run('DROP TABLE IF EXISTS bench_sessions_part');
  await run('DROP TABLE IF EXISTS bench_concurrency_delta');
  await run(
    'CREATE TABLE bench_concurrency_delta (tenant LowCardinality(String), s Int64, d Int64) ENGINE = MergeTree ORDER BY (tenant, s)',
  );
  for (let p = 0; p < parts; p++) {
    await run(`CREATE TABLE bench_sessions_part ENGINE = Memory AS
      SELECT tenant, session_id, events, content_id, region, country, pop, device, viewer, furthest_sec, duration_sec, ended,
        t2, wms, reb, segs, started_at, startup_at, startup_ms, fatal_at, first_ts, last_ts
      FROM (${sessionsSql(`cityHash64(session_id) % ${parts} = ${p}`)})`);
    // A row for each hour the session's span touches, as pipelines/audience/pipeline.ts writes them.
    await run(`INSERT INTO session_hours (tenant, hour, session_id, first_ts, last_ts, viewer, content_id, region, country, pop, device, events, furthest_sec, duration_sec, ended, version)
      SETTINGS ${noDedup}
      SELECT tenant, toDateTime(arrayJoin(range(intDiv(first_ts, 3600000) * 3600, intDiv(last_ts, 1000) + 1, 3600)), 'UTC'), session_id,
        fromUnixTimestamp64Milli(first_ts, 'UTC'), fromUnixTimestamp64Milli(last_ts, 'UTC'), viewer, content_id, region, country,
        pop, device, events, furthest_sec, duration_sec, ended, 1
      FROM bench_sessions_part`);
    await run(`INSERT INTO watch_time_minutes (tenant, ts, watch_ms, rebuffer_ms) SETTINGS ${noDedup}
      SELECT tenant, ${minute('t')} AS m, sum(w), sum(if(rb, w, 0)) FROM bench_sessions_part ARRAY JOIN t2 AS t, wms AS w, reb AS rb
      WHERE w > 0 GROUP BY tenant, m`);
    await run(`INSERT INTO content_minute_sums (tenant, ts, content_id, furthest_sec, watch_ms) SETTINGS ${noDedup}
      SELECT tenant, ${minute('t')} AS m, content_id, -1, sum(w) FROM bench_sessions_part ARRAY JOIN t2 AS t, wms AS w
      WHERE w > 0 AND content_id != '' GROUP BY tenant, m, content_id`);
    await run(`INSERT INTO qos_minutes (tenant, ts, region, pop, watch_ms, rebuffer_ms, sessions_started, fatal_sessions, startups, startup_ms) SETTINGS ${noDedup}
      SELECT tenant, ${minute('at')} AS m, region, pop, sum(w), sum(rw), sum(ss), sum(fs), sum(su), sum(sm) FROM (
        SELECT tenant, region, pop, t AS at, w, if(rb, w, 0) AS rw, 0 AS ss, 0 AS fs, 0 AS su, toInt64(0) AS sm
          FROM bench_sessions_part ARRAY JOIN t2 AS t, wms AS w, reb AS rb WHERE w > 0
        UNION ALL SELECT tenant, region, pop, assumeNotNull(started_at), 0, 0, 1, 0, 0, 0 FROM bench_sessions_part WHERE started_at IS NOT NULL
        UNION ALL SELECT tenant, region, pop, assumeNotNull(fatal_at), 0, 0, 0, 1, 0, 0 FROM bench_sessions_part WHERE fatal_at IS NOT NULL
        UNION ALL SELECT tenant, region, pop, assumeNotNull(startup_at), 0, 0, 0, 0, 1, assumeNotNull(startup_ms) FROM bench_sessions_part WHERE startup_at IS NOT NULL
      ) GROUP BY tenant, m, region, pop`);
    await run(`INSERT INTO qos_startup_histogram (tenant, ts, region, pop, bucket, startups) SETTINGS ${noDedup}
      SELECT tenant, ${minute('assumeNotNull(startup_at)')} AS m, region, pop,
        toUInt16(if(startup_ms <= 1, 0, ceil(log(startup_ms) / log(1.05)))) AS bucket, count()
      FROM bench_sessions_part WHERE startup_at IS NOT NULL GROUP BY tenant, m, region, pop, bucket`);
    await run(`INSERT INTO bench_concurrency_delta
      SELECT tenant, p.1 AS s, sum(p.2) FROM bench_sessions_part ARRAY JOIN segs AS g ARRAY JOIN [(g.1, toInt64(1)), (g.2, toInt64(-1))] AS p
      WHERE g.2 > g.1 GROUP BY tenant, s`);
    await run('DROP TABLE bench_sessions_part');
    progress(`sessions part ${p + 1}/${parts}`);
  }
  // Per-second viewers: the running sum of the +1/-1 changes, held from each change to the next.
  await run(`INSERT INTO concurrency_seconds (tenant, ts, sessions) SETTINGS ${noDedup}
    SELECT tenant, toDateTime(sec, 'UTC'), v FROM (
      SELECT * FROM (
        SELECT tenant, s, v, leadInFrame(s) OVER (PARTITION BY tenant ORDER BY s ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS nxt FROM (
          SELECT tenant, s, sum(sum(d)) OVER (PARTITION BY tenant ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS v
          FROM bench_concurrency_delta GROUP BY tenant, s
        )
      ) WHERE v != 0
    ) ARRAY JOIN range(s, greatest(nxt, s + 1)) AS sec`);
  await run('DROP TABLE bench_concurrency_delta');
  progress('concurrency_seconds');
  await run(`INSERT INTO content_catalog (tenant, content_id, ts, published, title, content_type, duration_sec) SETTINGS ${noDedup}
    SELECT tenant, content_id, ts, event_type = 'content_published', content_title, content_type,
      if(event_type = 'content_published' AND JSONExtractFloat(properties, 'duration_sec') > 0, JSONExtractFloat(properties, 'duration_sec'), NULL)
    FROM events WHERE content_id != '' AND (event_type = 'content_published' OR content_title != '' OR content_type != '')`);
  await run(`INSERT INTO billing_events (tenant, ts, user_id, kind, amount_inr, plan) SETTINGS ${noDedup}
    SELECT tenant, ts, user_id, event_type, JSONExtractFloat(properties, 'amount_inr'), JSONExtractString(properties, 'plan')
    FROM events WHERE event_type IN ${billingKinds} AND user_id != ''`);
  // From billing_events, by the table's own statement for every row.
  await run(subscriptionUsers.derivedFrom.fill);
  await run(`INSERT INTO quota_minutes (tenant, ts, events) SETTINGS ${noDedup}
    SELECT tenant, toDateTime(toStartOfMinute(received_at), 'UTC') AS m, count() FROM events GROUP BY tenant, m`);
  progress('content_catalog, billing_events, subscription_users, quota_minutes');
  for (const t of [
    'watch_time_minutes',
    'qos_minutes',
    'qos_startup_histogram',
    'concurrency_seconds',
    'quota_minutes',
    'session_hours',
  ]) {
    await run(`OPTIMIZE TABLE ${t} FINAL`);
  }
  progress('sum tables and session_hours merged');
  // From session_hours: viewer windows by the statement replay uses; completion sums each session in the row of its
  // first hour, under the minute it started (as pipelines/content/pipeline.ts writes them).
  await run(viewerWindows.rebuild!(false));
  await run(`INSERT INTO content_minute_sums (tenant, ts, content_id, furthest_sec, sessions, completion_sum) SETTINGS ${noDedup}
    SELECT tenant, toStartOfMinute(first_ts) AS m, content_id, if(known, -1, furthest_sec) AS f, toInt64(count()),
      sum(if(known, if(ended = 1, 100, least(100, furthest_sec / assumeNotNull(duration_sec) * 100)), 0))
    FROM (SELECT *, ended = 1 OR ifNull(duration_sec, 0) > 0 AS known FROM session_hours FINAL
          WHERE hour = toStartOfHour(first_ts) AND notEmpty(content_id))
    GROUP BY tenant, m, content_id, f`);
  for (const t of ['viewer_windows', 'content_minute_sums']) await run(`OPTIMIZE TABLE ${t} FINAL`);
  progress('viewer_windows, content_minute_sums');
}

// ---------------------------------------------------------------------------------------------------------------
// Answers from the raw events

/** A bound on session length, stated with the figures: sessions are read from events in [from − 1 day, to). */
export const lookbackMs = day;

async function rows<T>(
  client: ClickHouseClient,
  query: string,
  params: Record<string, string | number> = {},
): Promise<T[]> {
  const result = await client.query({ query, query_params: params, format: 'JSONEachRow' });
  return result.json<T>();
}

const rawSettings = (timeoutS: number): string =>
  `SETTINGS max_execution_time = ${timeoutS}, timeout_overflow_mode = 'throw'`;
const ms = (name: string): string => `fromUnixTimestamp64Milli({${name}:Int64}, 'UTC')`;
const tenantEvents = (lo: string, hi: string): string =>
  `tenant = {tenant:String} AND ts >= ${ms(lo)} AND ts < ${ms(hi)}`;
const inRangeSql = (fromName: string, toName: string): string =>
  `first_ts < {${toName}:Int64} AND last_ts >= {${fromName}:Int64}`;
/** Watch time of a session attributed to instants in [from, to). */
const watchIn = (fromName: string, toName: string): string =>
  `arraySum((w, t) -> if(t >= {${fromName}:Int64} AND t < {${toName}:Int64}, w, 0), wms, t2)`;
const hours = (n: number): number => n / 3_600_000;
const changePct = (a: number, b: number): number => (b === 0 ? (a === 0 ? 0 : 100) : ((a - b) / b) * 100);

/** docs/metrics.md "Overview" from events: one query over sessions, two over billing events. */
export async function rawOverview(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  timeoutS: number,
): Promise<Overview> {
  const to = range.to;
  const params = {
    tenant,
    from: range.from,
    to,
    lo: Math.min(range.from, to - 30 * day) - lookbackMs,
    m30: to - 30 * day,
    w1: to - 7 * day,
    w0: to - 14 * day,
  };
  const viewers = (a: string, b: string): string => `uniqExactIf(viewer, viewer != '' AND ${inRangeSql(a, b)})`;
  const paidAt = (t: string): string =>
    `argMaxIf(event_type, (ts, indexOf(['subscription_started', 'subscription_renewed', 'subscription_cancelled', 'subscription_expired'], event_type)), ts < ${ms(t)})`;
  const [[s], [p], [b]] = await Promise.all([
    rows<{ mau: string; mau1: string; mau0: string; watch: string; watch1: string; watch0: string }>(
      client,
      `SELECT ${viewers('m30', 'to')} AS mau, ${viewers('w1', 'to')} AS mau1, ${viewers('w0', 'w1')} AS mau0,
         sum(${watchIn('from', 'to')}) AS watch, sum(${watchIn('w1', 'to')}) AS watch1, sum(${watchIn('w0', 'w1')}) AS watch0
       FROM (${sessionsSql(tenantEvents('lo', 'to'))}) ${rawSettings(timeoutS)}`,
      params,
    ),
    rows<{ paid: string; paid_from: string; paid_w1: string }>(
      client,
      `SELECT countIf(a IN ('subscription_started', 'subscription_renewed')) AS paid, countIf(b IN ('subscription_started', 'subscription_renewed')) AS paid_from,
         countIf(c IN ('subscription_started', 'subscription_renewed')) AS paid_w1
       FROM (SELECT user_id, ${paidAt('to')} AS a, ${paidAt('from')} AS b, ${paidAt('w1')} AS c
             FROM events WHERE tenant = {tenant:String} AND event_type IN ${subscriptionKinds} AND user_id != '' GROUP BY user_id)
       ${rawSettings(timeoutS)}`,
      params,
    ),
    rows<{ revenue: number; rev1: number; rev0: number; churned: string }>(
      client,
      `SELECT sumIf(amount, kind = 'payment_succeeded' AND ts >= ${ms('from')} AND ts < ${ms('to')}) AS revenue,
         sumIf(amount, kind = 'payment_succeeded' AND ts >= ${ms('w1')} AND ts < ${ms('to')}) AS rev1,
         sumIf(amount, kind = 'payment_succeeded' AND ts >= ${ms('w0')} AND ts < ${ms('w1')}) AS rev0,
         uniqExactIf(user_id, kind != 'payment_succeeded' AND ts >= ${ms('from')} AND ts < ${ms('to')}) AS churned
       FROM (SELECT event_type AS kind, ts, user_id, if(event_type = 'payment_succeeded', JSONExtractFloat(properties, 'amount_inr'), 0) AS amount
             FROM events WHERE tenant = {tenant:String} AND event_type IN ('payment_succeeded', 'subscription_cancelled', 'subscription_expired') AND user_id != '')
       ${rawSettings(timeoutS)}`,
      params,
    ),
  ]);
  const paid = Number(p!.paid);
  const paidFrom = Number(p!.paid_from);
  return {
    monthly_active_users: Number(s!.mau),
    watch_hours: hours(Number(s!.watch)),
    paid_subscribers: paid,
    arpu_inr: paid === 0 ? 0 : Number(b!.revenue) / paid,
    churn_pct: paidFrom === 0 ? 0 : (Number(b!.churned) / paidFrom) * 100,
    wow_delta: {
      mau: changePct(Number(s!.mau1), Number(s!.mau0)),
      watch_hours: changePct(hours(Number(s!.watch1)), hours(Number(s!.watch0))),
      subs: changePct(paid, Number(p!.paid_w1)),
      revenue: changePct(Number(b!.rev1), Number(b!.rev0)),
    },
  };
}

/**
 * docs/metrics.md "Concurrency" from events: +1 at the first second each active segment counts, −1 after its last;
 * the running sum is the per-second count, evaluated at every change and at every point's first second (and `from`).
 */
export async function rawConcurrency(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  intervalMinutes: Interval,
  timeoutS: number,
): Promise<ConcurrencySeries> {
  const step = intervalMinutes * 60;
  const fromS = range.from / 1000;
  const toS = range.to / 1000;
  const marks: number[] = [fromS];
  for (let p = Math.ceil(fromS / step) * step; p < toS; p += step) marks.push(p);
  const buckets = await rows<{ p: string; value: string; first: string }>(
    client,
    `SELECT intDiv(s, {step:Int64}) * {step:Int64} AS p, max(v) AS value, argMin(s, (-v, s)) AS first FROM (
       SELECT s, sum(sum(d)) OVER (ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS v FROM (
         SELECT pt.1 AS s, pt.2 AS d FROM (${sessionsSql(tenantEvents('lo', 'to'))})
           ARRAY JOIN segs AS g ARRAY JOIN [(g.1, toInt64(1)), (g.2, toInt64(-1))] AS pt WHERE g.2 > g.1
         UNION ALL SELECT arrayJoin({marks:Array(Int64)}) AS s, toInt64(0) AS d
       ) GROUP BY s
     ) WHERE s >= {from_s:Int64} AND s < {to_s:Int64} GROUP BY p ORDER BY p ${rawSettings(timeoutS)}`,
    {
      tenant,
      lo: range.from - lookbackMs,
      to: range.to,
      step,
      from_s: fromS,
      to_s: toS,
      marks: `[${marks.join(',')}]`,
    },
  );
  const byPoint = new Map(buckets.map((b) => [Number(b.p), b]));
  const points: ConcurrencySeries['points'] = [];
  let peak = 0;
  let peakAt = range.from;
  for (let p = Math.floor(fromS / step) * step; p < toS; p += step) {
    const b = byPoint.get(p);
    const value = b ? Math.max(0, Number(b.value)) : 0;
    if (value > peak) {
      peak = value;
      peakAt = Number(b!.first) * 1000;
    }
    points.push({ ts: new Date(p * 1000).toISOString(), value });
  }
  return { interval_minutes: intervalMinutes, points, peak, peak_at: new Date(peakAt).toISOString() };
}

/** docs/metrics.md "Top content" from events: per session content, and the catalogue from all the tenant's events. */
export async function rawTopContent(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  timeoutS: number,
): Promise<TopContentItem[]> {
  const list = await rows<{
    content_id: string;
    ms: string;
    sessions: string;
    viewers: string;
    completion: number | null;
    title: string;
    content_type: string;
  }>(
    client,
    `SELECT content_id, sum(${watchIn('from', 'to')}) AS ms, countIf(${inRangeSql('from', 'to')}) AS sessions,
       uniqExactIf(viewer, viewer != '' AND ${inRangeSql('from', 'to')}) AS viewers,
       avgOrNullIf(if(ended = 1, 100, if(d > 0, least(100, furthest_sec / d * 100), NULL)), ${inRangeSql('from', 'to')}) AS completion,
       any(title) AS title, any(ctype) AS content_type
     FROM (
     SELECT x.content_id AS content_id, wms, t2, first_ts, last_ts, viewer, ended, furthest_sec, c.title AS title, c.ctype AS ctype,
       coalesce(x.duration_sec, c.pub_duration) AS d
     FROM (
       SELECT content_id, wms, t2, first_ts, last_ts, viewer, ended, furthest_sec, duration_sec
       FROM (${sessionsSql(tenantEvents('lo', 'to'))}) WHERE content_id != ''
     ) AS x
     LEFT JOIN (
       SELECT content_id, countIf(event_type = 'content_published') > 0 AS published,
         if(published, argMaxIf(content_title, ts, event_type = 'content_published'), argMaxIf(content_title, ts, event_type != 'content_published' AND content_title != '')) AS title,
         if(published, argMaxIf(content_type, ts, event_type = 'content_published'), argMaxIf(content_type, ts, event_type != 'content_published' AND content_type != '')) AS ctype,
         argMaxIf(if(JSONExtractFloat(properties, 'duration_sec') > 0, JSONExtractFloat(properties, 'duration_sec'), NULL), ts, event_type = 'content_published') AS pub_duration
       FROM events
       WHERE tenant = {tenant:String} AND content_id != '' AND (event_type = 'content_published' OR content_title != '' OR content_type != '')
       GROUP BY content_id
     ) AS c ON x.content_id = c.content_id
     )
     GROUP BY content_id
     HAVING ms != 0 OR sessions > 0 ${rawSettings(timeoutS)}`,
    { tenant, lo: range.from - lookbackMs, from: range.from, to: range.to },
  );
  return list
    .map((r) => ({
      content_id: r.content_id,
      title: r.title,
      content_type: r.content_type,
      watch_hours: hours(Number(r.ms)),
      completion_pct: r.completion === null ? 0 : Number(r.completion),
      unique_viewers: Number(r.viewers),
    }))
    .sort((a, b) => b.watch_hours - a.watch_hours || (a.content_id < b.content_id ? -1 : 1));
}

/** docs/metrics.md "Geo" from events. */
export async function rawGeo(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  timeoutS: number,
): Promise<GeoItem[]> {
  const list = await rows<{ region: string; ms: string; viewers: string; sessions: string }>(
    client,
    `SELECT region, sum(${watchIn('from', 'to')}) AS ms, uniqExactIf(viewer, viewer != '' AND ${inRangeSql('from', 'to')}) AS viewers,
       countIf(${inRangeSql('from', 'to')}) AS sessions
     FROM (${sessionsSql(tenantEvents('lo', 'to'))}) GROUP BY region HAVING ms != 0 OR sessions > 0 ${rawSettings(timeoutS)}`,
    { tenant, lo: range.from - lookbackMs, from: range.from, to: range.to },
  );
  const total = list.reduce((s, r) => s + Number(r.ms), 0);
  return list
    .map((r) => ({
      region: r.region === '' ? 'unknown' : r.region,
      watch_hours: hours(Number(r.ms)),
      viewers: Number(r.viewers),
      share_pct: total === 0 ? 0 : (Number(r.ms) / total) * 100,
    }))
    .sort((a, b) => b.watch_hours - a.watch_hours || (a.region < b.region ? -1 : 1));
}

/** docs/metrics.md "Devices" from events. */
export async function rawDevices(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  timeoutS: number,
): Promise<DeviceItem[]> {
  const list = await rows<{ device: string; sessions: string }>(
    client,
    `SELECT device, count() AS sessions FROM (${sessionsSql(tenantEvents('lo', 'to'))}) WHERE ${inRangeSql('from', 'to')} GROUP BY device ${rawSettings(timeoutS)}`,
    { tenant, lo: range.from - lookbackMs, from: range.from, to: range.to },
  );
  const total = list.reduce((s, r) => s + Number(r.sessions), 0);
  return list
    .map((r) => ({
      device: r.device === '' ? 'unknown' : r.device,
      sessions: Number(r.sessions),
      share_pct: total === 0 ? 0 : (Number(r.sessions) / total) * 100,
    }))
    .sort((a, b) => b.sessions - a.sessions || (a.device < b.device ? -1 : 1));
}

export { rows as selectRows };
