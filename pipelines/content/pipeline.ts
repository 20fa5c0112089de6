import {
  minuteOf,
  timeRollups,
  type Cell,
  type Pipeline,
  type SessionAttrs,
  type TableSpec,
} from '../../src/metric/pipeline.js';
import {
  cohortFields,
  cohortName,
  describeCohort,
  explain,
  round,
  sumFields,
  type CohortDimensions,
  type OnceDetector,
  windowDetector,
} from '../../src/metric/detector.js';
import { watchMs } from '../watch-time/pipeline.js';

/** What events say about a content: its title, type and duration; `published` marks a content_published. */
export const contentCatalog: TableSpec = {
  name: 'content_catalog',
  engine: 'append',
  key: [
    ['tenant', 'LowCardinality(String)'],
    ['content_id', 'String'],
    ['ts', 'DateTime64(3)'],
  ],
  values: [
    ['published', 'UInt8'],
    ['title', 'String'],
    ['content_type', 'LowCardinality(String)'],
    ['duration_sec', 'Nullable(Float64)'],
  ],
  // The latest of each per content and kind (published or not), which is all top content reads: a few rows per
  // content instead of one per play.
  projections: [
    [
      'latest',
      `SELECT tenant, content_id, published, argMax(title, ts), argMaxIf(title, ts, notEmpty(title)), argMax(content_type, ts),
         argMaxIf(content_type, ts, notEmpty(content_type)), argMax(duration_sec, ts) GROUP BY tenant, content_id, published`,
    ],
  ],
};

/**
 * A session's completion (docs/metrics.md "Top content"), or null when its content's length is unknown: `duration`
 * is the session's own (from its play_start), else the content's published one.
 */
export function completion(ended: boolean, furthestSec: number, duration: number | null): number | null {
  if (ended) return 100;
  if (duration === null || !(duration > 0)) return null;
  return Math.min(100, (furthestSec / duration) * 100);
}

export const completionOf = (a: SessionAttrs): number | null => completion(a.ended, a.furthest_sec, a.duration_sec);

/** Per content and minute, and a session's furthest position (-1 for any other row: see `contentMinuteSums`). */
const minuteFurthestKey: TableSpec['key'] = [
  ['tenant', 'LowCardinality(String)'],
  ['ts', 'DateTime'],
  ['content_id', 'String'],
  ['furthest_sec', 'Float64'],
];

/**
 * Per content and minute, what top content sums over a range (docs/store.md "Completion"): watch time (`watch_ms`,
 * under the minute it was watched), and the completion of the sessions that started in the minute (`sessions`,
 * `completion_sum`, under the minute of their start). A session whose completion needs the content's published
 * duration (not ended, no duration of its own) is counted under its `furthest_sec`, so the query can apply the
 * duration it reads; the others, and watch time, under -1. One table, so top content reads one set of tiers.
 */
export const contentMinuteSums: TableSpec = {
  name: 'content_minute_sums',
  engine: 'sum',
  key: minuteFurthestKey,
  values: [
    ['watch_ms', 'Int64'],
    ['sessions', 'Int64'],
    ['completion_sum', 'Float64'],
  ],
  projections: timeRollups(['content_id', 'furthest_sec'], ['watch_ms', 'sessions', 'completion_sum']),
};

/** First playback (or publication) of a content id the cluster has never seen. */
export const newRelease: OnceDetector = {
  kind: 'once',
  category: 'content.new_release_detected',
  source: 'content',
  signal: 'content_seen',
  params: {},
  mark: ([contentId]) => contentId!,
  label: ([contentId, title]) => [contentId!, title ?? ''],
  finding([contentId, title, contentType]) {
    return {
      severity: 'info',
      title: `New release: ${title || contentId}`,
      description: `First playback of ${JSON.stringify(contentId)}.`,
      data: { severity: 'info', content_id: contentId, title: title || null, content_type: contentType || null },
    };
  },
};

const day = 86_400;
/** Hours before the judged ones whose cohorts are a completion drop's cohort baseline. */
const cohortBaselineHours = 24;

// What a title's completion drop is explained by (docs/alerts.md "Naming the cause"): a regional incident ends the
// sessions of every title watched there early.
const completionCohorts: CohortDimensions = [
  ['region', 'region'],
  ['pop', 'pop'],
  ['device', 'device'],
  ['app_version', 'app_version'],
  ['player', 'player'],
];

/** Completion of the sessions that closed in the current UTC hour against the 7 days before it. */
export const completionDrop = windowDetector({
  kind: 'window',
  category: 'content.completion_drop',
  source: 'content',
  signal: 'completion',
  cohortSignal: 'completion_cohorts',
  bucketSeconds: 3600,
  historyBuckets: 7 * 24 + 1,
  // A day is baseline enough for a cohort's own completion, and a title's cohorts are tens of counters an hour.
  cohortHistoryBuckets: cohortBaselineHours + 2,
  running: 1,
  params: {
    drop_points: 'the hour\u2019s completion is at least this many points under the 7-day completion',
    min_sessions: 'closed sessions in the hour (and in the 7 days), at least',
  },
  evaluate(w) {
    const t = w.thresholds;
    const cur = w.at(w.bucket);
    if (!cur || (cur.sessions ?? 0) < t.min_sessions) return null;
    // Firing hours are left out.
    const base = sumFields(w, w.bucket - 7 * day, w.bucket, true);
    if ((base.sessions ?? 0) < t.min_sessions) return null;
    const now = cur.pct! / cur.sessions!;
    const before = base.pct! / base.sessions!;
    if (now > before - t.drop_points) return null;
    const [contentId] = w.key;
    const title = w.label(contentId!);
    const severity = now > 0 && before / now < 3 ? 'warning' : 'critical';
    // Explained as a mean: the points each session fell short of finishing, per session.
    const c = explain(
      w.cohorts(w.bucket) ?? {},
      sumFields(w, w.bucket - cohortBaselineHours * w.step, w.bucket, true, 'cohorts'),
      'u',
      'n',
      'mean',
    );
    // In words and in `data`, as completion: 100 less the points short.
    const shown = c && { ...c, current: round(100 - c.current), baseline: round(100 - c.baseline) };
    const cohort = shown && {
      dimension: shown.dimension,
      value: shown.value,
      current_pct: shown.current,
      baseline_pct: shown.baseline,
      share: shown.share,
      sessions: shown.exposure,
    };
    return {
      severity,
      title: `Completion drop: ${title || contentId}${c ? `, mostly ${cohortName(c, w)}` : ''}`,
      description:
        `${round(now)} % completion this hour against ${round(before)} % over 7 days (${cur.sessions} sessions).` +
        describeCohort(shown, w, 'of the drop', ' %'),
      data: {
        severity,
        content_id: contentId,
        title: title || null,
        current_pct: round(now),
        baseline_pct: round(before),
        cohort,
      },
    };
  },
});

// A row of `content_minute_sums` under furthest_sec -1 (watch time, known completion), as every segment and most
// position changes emit one: the same arrays, filled anew for each (the emitter copies what it keeps).
const scratchKey: [string, number, string, number] = ['', 0, '', -1];
const scratchValues = [0, 0, 0];

function sumKey(tenant: string, ts: number, contentId: string): readonly Cell[] {
  scratchKey[0] = tenant;
  scratchKey[1] = ts;
  scratchKey[2] = contentId;
  return scratchKey;
}

function sumValues(watchMs: number, sessions: number, completionSum: number): readonly number[] {
  scratchValues[0] = watchMs;
  scratchValues[1] = sessions;
  scratchValues[2] = completionSum;
  return scratchValues;
}

export const content: Pipeline = {
  name: 'content',
  tables: [contentMinuteSums, contentCatalog],
  detectors: [newRelease, completionDrop],
  sessionReads: [
    'tenant',
    'content_id',
    'ended',
    'furthest_sec',
    'duration_sec',
    'closed_at',
    'first_minute',
    ...completionCohorts.map(([, attr]) => attr),
  ],
  session(a, sign, out) {
    if (a.content_id === '') return;
    const c = completionOf(a);
    // Detector signal `completion` [tenant, content] per minute of closing: sessions, Σ completion; by cohort,
    // sessions (`n`) and Σ of the points short of 100 (`u`).
    if (c !== null && a.closed_at !== null) {
      const key = [a.tenant, a.content_id];
      const at = minuteOf(a.closed_at);
      out.signal('completion', key, at, { sessions: sign, pct: sign * c });
      out.signal('completion_cohorts', key, at, cohortFields(a, completionCohorts, { n: sign, u: sign * (100 - c) }));
    }
    if (a.first_minute !== null)
      out.add(
        contentMinuteSums,
        [a.tenant, a.first_minute / 1000, a.content_id, c === null ? a.furthest_sec : -1],
        [0, sign, c === null ? 0 : sign * c],
      );
  },
  // Mostly an open session's furthest position moved: its completion changes within the same row.
  sessionChange(before, after, out) {
    const cb = completionOf(before);
    const ca = completionOf(after);
    const sameRow =
      before.tenant === after.tenant &&
      before.content_id === after.content_id &&
      before.first_minute === after.first_minute &&
      after.content_id !== '' &&
      after.first_minute !== null;
    if (sameRow && before.closed_at === null && after.closed_at === null && cb !== null && ca !== null) {
      if (ca !== cb)
        out.add(
          contentMinuteSums,
          sumKey(after.tenant, after.first_minute / 1000, after.content_id),
          sumValues(0, 0, ca - cb),
        );
      return;
    }
    content.session!(before, -1, out);
    content.session!(after, 1, out);
  },
  segment(attrs, seg, sign, out) {
    const ms = watchMs(seg);
    if (ms === 0 || attrs.content_id === '') return;
    out.add(contentMinuteSums, sumKey(attrs.tenant, minuteOf(seg.to!), attrs.content_id), sumValues(sign * ms, 0, 0));
  },
  event(e, out) {
    if (!e.content_id) return;
    const published = e.event_type === 'content_published';
    // Detector signal `content_seen` [tenant, content, title, type] per minute: plays and publications.
    if (published || e.event_type === 'play_start') {
      out.signal(
        'content_seen',
        [e.tenant, e.content_id, e.content_title ?? '', e.content_type ?? ''],
        minuteOf(e.ts),
        { events: 1 },
      );
    }
    const d = e.properties?.duration_sec;
    const duration = published && typeof d === 'number' && d > 0 ? d : null;
    if (!published && !e.content_title && !e.content_type) return;
    out.append(contentCatalog, [
      e.tenant,
      e.content_id,
      e.ts,
      published ? 1 : 0,
      e.content_title ?? '',
      e.content_type ?? '',
      duration,
    ]);
  },
};
