import type { ClickHouseClient } from '@clickhouse/client';
import { hours, inRange, rangeParams, select, sessionsInRange, type Range } from './range.js';
import type { TopContentItem } from './answers.js';

/** What the catalogue says of each content's title and type: from the latest content_published, else the latest event carrying it. */
const catalogue = `SELECT content_id,
    countIf(published = 1) AS publishes,
    argMaxIf(title, ts, published = 1) AS pub_title,
    argMaxIf(title, ts, published = 0 AND title != '') AS ev_title,
    argMaxIf(content_type, ts, published = 1) AS pub_type,
    argMaxIf(content_type, ts, published = 0 AND content_type != '') AS ev_type
  FROM content_catalog WHERE tenant = {tenant:String} GROUP BY content_id`;

/** docs/metrics.md "Top content": the full ordered list (the API pages it). */
export async function topContent(client: ClickHouseClient, tenant: string, range: Range): Promise<TopContentItem[]> {
  const params = rangeParams(tenant, range);
  const [watch, perSession, catalog] = await Promise.all([
    select<{ content_id: string; ms: string }>(
      client,
      `SELECT content_id, sum(watch_ms) AS ms FROM content_minutes WHERE tenant = {tenant:String} AND ${inRange()} GROUP BY content_id HAVING ms != 0`,
      params,
    ),
    select<{ content_id: string; viewers: string; completion: number | null }>(
      client,
      // The catalogue's durations travel as one scalar (two arrays, looked up with transform) rather than a join of
      // every session with the whole catalogue, which read its titles a second time.
      `WITH (SELECT (groupArray(content_id), groupArray(assumeNotNull(d))) FROM (
               SELECT content_id, argMaxIf(duration_sec, ts, published = 1) AS d FROM content_catalog
               WHERE tenant = {tenant:String} AND published = 1 GROUP BY content_id
             ) WHERE d > 0) AS published
       SELECT content_id, uniqExactIf(viewer_key, viewer_key != 0) AS viewers,
         avgOrNull(if(ended = 1, 100, if(d > 0, least(100, furthest_sec / d * 100), NULL))) AS completion
       FROM (SELECT *, ifNull(duration_sec, transform(content_id, published.1, published.2, 0.0)) AS d
             FROM ${sessionsInRange(['content_id', 'viewer_key', 'ended', 'furthest_sec', 'duration_sec'])})
       WHERE content_id != '' GROUP BY content_id`,
      params,
    ),
    select<{ content_id: string; publishes: string; pub_title: string; ev_title: string; pub_type: string; ev_type: string }>(client, catalogue, params),
  ]);
  const items = new Map<string, TopContentItem>();
  const item = (id: string): TopContentItem => {
    let it = items.get(id);
    if (!it) items.set(id, (it = { content_id: id, title: '', content_type: '', watch_hours: 0, completion_pct: 0, unique_viewers: 0 }));
    return it;
  };
  for (const w of watch) item(w.content_id).watch_hours = hours(Number(w.ms));
  for (const s of perSession) {
    const it = item(s.content_id);
    it.unique_viewers = Number(s.viewers);
    it.completion_pct = s.completion === null ? 0 : Number(s.completion);
  }
  for (const c of catalog) {
    const it = items.get(c.content_id);
    if (!it) continue;
    const published = Number(c.publishes) > 0;
    it.title = published ? c.pub_title : c.ev_title;
    it.content_type = published ? c.pub_type : c.ev_type;
  }
  return [...items.values()].sort((a, b) => b.watch_hours - a.watch_hours || (a.content_id < b.content_id ? -1 : 1));
}
