import type { ClickHouseClient } from '@clickhouse/client';
import { hours, rangeParams, select, sessionsInRange, sumBy, type Range } from './range.js';
import type { TopContentItem } from './answers.js';
import { viewersIn } from './viewers.js';

// What the catalogue says of each content: the latest of each kind (published or not), in the form of the
// `content_catalog` projection `latest` (pipelines/content.ts), so it is read from a few rows per content.
const catalogue = `SELECT content_id, published, argMax(title, ts) AS last_title, argMaxIf(title, ts, notEmpty(title)) AS some_title,
    argMax(content_type, ts) AS last_type, argMaxIf(content_type, ts, notEmpty(content_type)) AS some_type
  FROM content_catalog WHERE tenant = {tenant:String} GROUP BY content_id, published`;

// The published durations travel as one scalar (two arrays, looked up with transform) rather than a join of every
// session with the catalogue.
const published = `(SELECT (groupArray(content_id), groupArray(assumeNotNull(d))) FROM (
    SELECT content_id, argMax(duration_sec, ts) AS d FROM content_catalog WHERE tenant = {tenant:String} AND published = 1 GROUP BY content_id
  ) WHERE d > 0)`;

/** The SQL of top content's catalogue reads, for tests that check they are answered from the projection. */
export const catalogueSql = { catalogue, published: `SELECT ${published}` };

/** docs/metrics.md "Top content": the full ordered list (the API pages it). */
export async function topContent(client: ClickHouseClient, tenant: string, range: Range): Promise<TopContentItem[]> {
  const params = rangeParams(tenant, range);
  const [watch, viewers, perSession, catalog] = await Promise.all([
    sumBy(client, 'content_minutes', 'content_id', 'watch_ms', tenant, range),
    viewersIn(client, tenant, 'content', range),
    select<{ content_id: string; completion: number | null }>(
      client,
      `WITH ${published} AS published
       SELECT content_id, avgOrNull(if(ended = 1, 100, if(d > 0, least(100, furthest_sec / d * 100), NULL))) AS completion
       FROM (SELECT *, ifNull(duration_sec, transform(content_id, published.1, published.2, 0.0)) AS d
             FROM ${sessionsInRange(['content_id', 'ended', 'furthest_sec', 'duration_sec'])})
       WHERE content_id != '' GROUP BY content_id`,
      params,
    ),
    select<{ content_id: string; published: number; last_title: string; some_title: string; last_type: string; some_type: string }>(client, catalogue, params),
  ]);
  const items = new Map<string, TopContentItem>();
  const item = (id: string): TopContentItem => {
    let it = items.get(id);
    if (!it) items.set(id, (it = { content_id: id, title: '', content_type: '', watch_hours: 0, completion_pct: 0, unique_viewers: 0 }));
    return it;
  };
  for (const [id, ms] of watch) if (ms !== 0) item(id).watch_hours = hours(ms);
  for (const s of perSession) item(s.content_id).completion_pct = s.completion === null ? 0 : Number(s.completion);
  for (const [id, n] of viewers) item(id).unique_viewers = n;
  // A content's title and type come from its latest content_published, else from the latest event carrying each.
  const isPublished = new Set(catalog.filter((c) => Number(c.published) === 1).map((c) => c.content_id));
  for (const c of catalog) {
    const it = items.get(c.content_id);
    if (!it) continue;
    if (Number(c.published) === 1) {
      it.title = c.last_title;
      it.content_type = c.last_type;
    } else if (!isPublished.has(c.content_id)) {
      it.title = c.some_title;
      it.content_type = c.some_type;
    }
  }
  return [...items.values()].sort((a, b) => b.watch_hours - a.watch_hours || (a.content_id < b.content_id ? -1 : 1));
}
