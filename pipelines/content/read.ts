import type { ClickHouseClient } from '@clickhouse/client';
import { completion, contentCatalog } from './pipeline.js';
import { hours, msParam, rangeParams, select, sumsBy, type Range } from '../../src/store/queries/range.js';
import type { Paged } from '../../src/store/queries/answers.js';
import type { TopContentItem } from './answer.js';
import { viewersIn } from '../viewers/read.js';
import { sessionHours } from '../audience/pipeline.js';

// What the catalogue says of some contents: the latest of each kind (published or not), in the form of the
// `content_catalog` projection `latest` (pipeline.ts), so it is read from a few rows per content. The
// published row's duration is the content's published one.
const catalogue = `SELECT content_id, published, argMax(title, ts) AS last_title, argMaxIf(title, ts, notEmpty(title)) AS some_title,
    argMax(content_type, ts) AS last_type, argMaxIf(content_type, ts, notEmpty(content_type)) AS some_type, argMax(duration_sec, ts) AS duration
  FROM ${contentCatalog.name} WHERE tenant = {tenant:String} AND content_id IN {ids:Array(String)} GROUP BY content_id, published`;

// Sessions that started before the range and run into it: each has a row in the hour of its start (docs/store.md).
const straddling = `SELECT content_id, ended, furthest_sec, duration_sec FROM ${sessionHours.name} FINAL
  PREWHERE hour = toStartOfHour(${msParam('from_ms')})
  WHERE tenant = {tenant:String} AND first_ts < ${msParam('from_ms')} AND last_ts >= ${msParam('from_ms')} AND notEmpty(content_id)`;

/** The SQL of top content's catalogue read, for tests that check it is answered from the projection. */
export const catalogueSql = { catalogue };

interface CatalogRow {
  content_id: string;
  published: number;
  last_title: string;
  some_title: string;
  last_type: string;
  some_type: string;
  duration: number | null;
}

/** What a content's completion is made of: sums per furthest position of sessions started in the range, and sessions before it. */
interface CompletionParts {
  started: Array<[furthest: number, sessions: number, sum: number]>;
  before: Array<{ ended: number; furthest_sec: number; duration_sec: number | null }>;
}

/** A session that started before the range and runs into it (`straddling`). */
type StraddlingRow = CompletionParts['before'][number] & { content_id: string };

/**
 * docs/metrics.md "Top content": the ordered list, or the page of it at `offset` (the API's), and its full length.
 * Watch time, and the completion of the range's sessions that started in it, come summed per minute from
 * `content_minute_sums` (one read of its tiers); completion is the mean over the range's sessions, those that started
 * before and run into it read from `session_hours`; sessions without a duration of their own take the content's
 * published one, as read now. The order needs watch time alone, so completion (and
 * the published durations it needs), distinct viewers, titles and types are computed for the page's contents only.
 */
export async function topContent(
  client: ClickHouseClient,
  tenant: string,
  range: Range,
  limit = Infinity,
  offset = 0,
): Promise<Paged<TopContentItem>> {
  const params = rangeParams(tenant, range);
  const [sums, before] = await Promise.all([
    sumsBy(
      client,
      'content_minute_sums',
      ['content_id', 'furthest_sec'],
      ['watch_ms', 'sessions', 'completion_sum'],
      tenant,
      range,
    ),
    select<StraddlingRow>(client, straddling, params),
  ]);
  const entries = new Map<string, CompletionParts & { item: TopContentItem }>();
  const entry = (id: string): CompletionParts & { item: TopContentItem } => {
    let e = entries.get(id);
    if (!e)
      entries.set(
        id,
        (e = {
          item: { content_id: id, title: '', content_type: '', watch_hours: 0, completion_pct: 0, unique_viewers: 0 },
          started: [],
          before: [],
        }),
      );
    return e;
  };
  const watchMs = new Map<string, number>();
  for (const {
    keys,
    sums: [ms, n, sum],
  } of sums) {
    const id = String(keys[0]);
    if (ms !== 0) watchMs.set(id, (watchMs.get(id) ?? 0) + ms!);
    if (n !== 0) entry(id).started.push([Number(keys[1]), n!, sum!]);
  }
  for (const [id, ms] of watchMs) if (ms !== 0) entry(id).item.watch_hours = hours(ms);
  for (const s of before) entry(s.content_id).before.push(s);
  const list = [...entries.values()]
    .map((e) => e.item)
    .sort((a, b) => b.watch_hours - a.watch_hours || (a.content_id < b.content_id ? -1 : 1));
  const page = list.slice(offset, offset + limit);
  const ids = page.map((it) => it.content_id);
  const [viewers, catalog] = await Promise.all([
    viewersIn(client, tenant, 'content', range, ids),
    ids.length === 0 ? [] : select<CatalogRow>(client, catalogue, { tenant, ids }),
  ]);
  for (const [id, n] of viewers) entries.get(id)!.item.unique_viewers = n;
  const publishedDuration = new Map(
    catalog
      .filter((c) => Number(c.published) === 1 && c.duration !== null)
      .map((c) => [c.content_id, Number(c.duration)]),
  );
  for (const it of page)
    it.completion_pct = completionPct(entries.get(it.content_id)!, publishedDuration.get(it.content_id) ?? null);
  // A content's title and type come from its latest content_published, else from the latest event carrying each.
  const isPublished = new Set(catalog.filter((c) => Number(c.published) === 1).map((c) => c.content_id));
  for (const c of catalog) {
    const it = entries.get(c.content_id)!.item;
    if (Number(c.published) === 1) {
      it.title = c.last_title;
      it.content_type = c.last_type;
    } else if (!isPublished.has(c.content_id)) {
      it.title = c.some_title;
      it.content_type = c.some_type;
    }
  }
  return { items: page, total: list.length };
}

/** The mean completion of a content's sessions whose completion is known; 0 when none is. */
function completionPct(parts: CompletionParts, publishedDuration: number | null): number {
  let n = 0;
  let total = 0;
  const add = (k: number, sum: number | null): void => {
    if (sum === null) return;
    n += k;
    total += sum;
  };
  for (const [furthest, k, sum] of parts.started) {
    // Known without the catalogue (furthest -1): the row holds the sum; else each session's furthest position.
    if (furthest < 0) add(k, sum);
    else {
      const c = completion(false, furthest, publishedDuration);
      add(k, c === null ? null : k * c);
    }
  }
  for (const s of parts.before)
    add(1, completion(Number(s.ended) === 1, s.furthest_sec, s.duration_sec ?? publishedDuration));
  return n > 0 ? total / n : 0;
}
