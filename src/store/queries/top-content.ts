import type { ClickHouseClient } from '@clickhouse/client';
import { completion } from '../../../pipelines/content.js';
import { hours, msParam, rangeParams, select, sumBy, sumsBy, type Range } from './range.js';
import type { Paged, TopContentItem } from './answers.js';
import { viewersIn } from './viewers.js';

// What the catalogue says of some contents: the latest of each kind (published or not), in the form of the
// `content_catalog` projection `latest` (pipelines/content.ts), so it is read from a few rows per content.
const catalogue = `SELECT content_id, published, argMax(title, ts) AS last_title, argMaxIf(title, ts, notEmpty(title)) AS some_title,
    argMax(content_type, ts) AS last_type, argMaxIf(content_type, ts, notEmpty(content_type)) AS some_type
  FROM content_catalog WHERE tenant = {tenant:String} AND content_id IN {ids:Array(String)} GROUP BY content_id, published`;

// Every published duration, which completion needs before the list can be ordered (the same projection).
const durations = `SELECT content_id, argMax(duration_sec, ts) AS duration
  FROM content_catalog WHERE tenant = {tenant:String} AND published = 1 GROUP BY content_id, published`;

// Sessions that started before the range and run into it: each has a row in the hour of its start (docs/store.md).
const straddling = `SELECT content_id, ended, furthest_sec, duration_sec FROM session_hours FINAL
  PREWHERE hour = toStartOfHour(${msParam('from_ms')})
  WHERE tenant = {tenant:String} AND first_ts < ${msParam('from_ms')} AND last_ts >= ${msParam('from_ms')} AND notEmpty(content_id)`;

/** The SQL of top content's catalogue read, for tests that check it is answered from the projection. */
export const catalogueSql = { catalogue, durations };

interface CatalogRow {
  content_id: string;
  published: number;
  last_title: string;
  some_title: string;
  last_type: string;
  some_type: string;
}

/**
 * docs/metrics.md "Top content": the ordered list, or the page of it at `offset` (the API's), and its full length.
 * Completion is the mean over the range's sessions: those that started in it come summed per minute of start from
 * `completion_minutes`, those that started before and run into it from `session_hours`; sessions without a duration
 * of their own take the content's published one, as read now. The order needs watch time alone, so distinct viewers,
 * titles and types are read for the page's contents only.
 */
export async function topContent(client: ClickHouseClient, tenant: string, range: Range, limit = Infinity, offset = 0): Promise<Paged<TopContentItem>> {
  const params = rangeParams(tenant, range);
  const [watch, started, before, published] = await Promise.all([
    sumBy(client, 'content_minutes', 'content_id', 'watch_ms', tenant, range),
    sumsBy(client, 'completion_minutes', ['content_id', 'furthest_sec'], ['sessions', 'completion_sum'], tenant, range),
    select<{ content_id: string; ended: number; furthest_sec: number; duration_sec: number | null }>(client, straddling, params),
    select<{ content_id: string; duration: number | null }>(client, durations, params),
  ]);
  const items = new Map<string, TopContentItem>();
  const item = (id: string): TopContentItem => {
    let it = items.get(id);
    if (!it) items.set(id, (it = { content_id: id, title: '', content_type: '', watch_hours: 0, completion_pct: 0, unique_viewers: 0 }));
    return it;
  };
  for (const [id, ms] of watch) if (ms !== 0) item(id).watch_hours = hours(ms);
  const publishedDuration = new Map(published.filter((c) => c.duration !== null).map((c) => [c.content_id, Number(c.duration)]));
  // Per content: sessions whose completion is known, and its sum.
  const completions = new Map<string, [n: number, sum: number]>();
  const add = (id: string, n: number, total: number | null): void => {
    item(id);
    if (total === null) return;
    const acc = completions.get(id) ?? [0, 0];
    completions.set(id, [acc[0] + n, acc[1] + total]);
  };
  const times = (n: number, c: number | null): number | null => (c === null ? null : n * c);
  for (const { keys, sums } of started) {
    const [id, furthest] = [String(keys[0]), Number(keys[1])];
    const [n, sum] = sums as [number, number];
    if (n === 0) continue;
    // Known without the catalogue (furthest -1): the row holds the sum; else each session's furthest position.
    if (furthest < 0) add(id, n, sum);
    else add(id, n, times(n, completion(false, furthest, publishedDuration.get(id) ?? null)));
  }
  for (const s of before) add(s.content_id, 1, completion(Number(s.ended) === 1, s.furthest_sec, s.duration_sec ?? publishedDuration.get(s.content_id) ?? null));
  for (const [id, [n, sum]] of completions) if (n > 0) item(id).completion_pct = sum / n;
  const list = [...items.values()].sort((a, b) => b.watch_hours - a.watch_hours || (a.content_id < b.content_id ? -1 : 1));
  const page = list.slice(offset, offset + limit);
  const ids = page.map((it) => it.content_id);
  const [viewers, catalog] = await Promise.all([
    viewersIn(client, tenant, 'content', range, ids),
    ids.length === 0 ? [] : select<CatalogRow>(client, catalogue, { tenant, ids }),
  ]);
  for (const [id, n] of viewers) items.get(id)!.unique_viewers = n;
  // A content's title and type come from its latest content_published, else from the latest event carrying each.
  const isPublished = new Set(catalog.filter((c) => Number(c.published) === 1).map((c) => c.content_id));
  for (const c of catalog) {
    const it = items.get(c.content_id)!;
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
