import { cohortMeasure } from '../contracts/alert-cohort.js';
import type { WebhookEvent } from '../contracts/webhook-events.js';

const titles: Record<string, string> = {
  'qos.rebuffer_spike': 'Rebuffering spike',
  'qos.startup_regression': 'Startup time regression',
  'qos.error_spike': 'Playback error spike',
  'billing.payment_failure': 'Payment failures',
  'billing.churn_spike': 'Churn spike',
  'ingest.quota_80pct': '80 % of the monthly event quota used',
  'ingest.quota_exceeded': 'Monthly event quota exceeded',
  'content.new_release_detected': 'New release detected',
  'content.completion_drop': 'Completion drop',
  'test.ping': 'Test message from Darshak',
};

/** The longest an untrusted value is shown: a title or a region name fits; a flood of text does not. */
const maxValueChars = 120;

/**
 * A value that may come from ingest (a content title, a region, a PoP, an error code) as Slack mrkdwn shows it
 * literally: `&`, `<` and `>` escaped, so `<!channel>` or `<https://…|label>` stay text, and cut to a bound.
 */
export function slackText(v: unknown): string {
  const s = String(v);
  const cut = s.length > maxValueChars ? `${s.slice(0, maxValueChars)}…` : s;
  return cut.replace(/[&<>]/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : '&gt;'));
}

const num = (v: unknown): string => (typeof v === 'number' ? String(Math.round(v * 100) / 100) : slackText(v));

/** The current and baseline values of an alert's data, whichever pair its category has. */
function rates(data: Record<string, unknown>): string | null {
  const pairs: Array<[string, string, string]> = [
    ['current_rate', 'baseline_rate', ' %'],
    ['current_p50_ms', 'baseline_p50_ms', ' ms'],
    ['current_pct', 'baseline_pct', ' %'],
    ['cancellations', 'baseline', ''],
  ];
  for (const [c, b, unit] of pairs)
    if (data[c] !== undefined && data[b] !== undefined)
      return `${num(data[c])}${unit} (baseline ${num(data[b])}${unit})`;
  if (data.failure_rate !== undefined) return `${num(data.failure_rate)} % failed`;
  if (data.used !== undefined && data.quota !== undefined) return `${num(data.used)} of ${num(data.quota)} events`;
  return null;
}

/** The cohort a QoS alert names (docs/alerts.md "Naming the cause"), in words, or null. */
function cause(data: Record<string, unknown>): { name: string; words: string } | null {
  const c = data.cohort;
  if (typeof c !== 'object' || c === null) return null;
  const { dimension, value, share } = c as Record<string, unknown>;
  if (typeof dimension !== 'string' || typeof value !== 'string') return null;
  const m = cohortMeasure(c as Record<string, unknown>);
  const moved = m && `${num(m.now)}${m.unit} (baseline ${num(m.before)}${m.unit})`;
  const name = `${slackText(dimension.replace('_', ' '))} ${slackText(value)}`;
  return {
    name,
    words: `${name}${typeof share === 'number' ? `, ${Math.round(share * 100)} % of it` : ''}${moved ? `: ${moved}` : ''}`,
  };
}

/** The dashboard's alerts page (docs/dashboard.md), where the one who reads the message acknowledges it. */
const alertsPage = (dashboardUrl: string): string => `${dashboardUrl.replace(/\/+$/, '')}/alerts`;

/** A Slack message: `text` for notifications, `blocks` for the channel (title, severity, where, rates, who, a link). */
export function slackMessage(event: WebhookEvent, dashboardUrl: string): { text: string; blocks: unknown[] } {
  const d = event.data;
  const title = titles[event.type] ?? event.type;
  const severity = typeof d.severity === 'string' ? slackText(d.severity) : 'info';
  const where = [d.region, d.pop]
    .filter((v) => typeof v === 'string' && v !== '')
    .map(slackText)
    .join(' / ');
  const current = rates(d);
  const fields: Array<{ type: 'mrkdwn'; text: string }> = [{ type: 'mrkdwn', text: `*Severity*\n${severity}` }];
  if (where) fields.push({ type: 'mrkdwn', text: `*Region / PoP*\n${where}` });
  if (current) fields.push({ type: 'mrkdwn', text: `*Current vs baseline*\n${current}` });
  if (d.affected_sessions !== undefined)
    fields.push({ type: 'mrkdwn', text: `*Affected sessions*\n${num(d.affected_sessions)}` });
  const why = cause(d);
  if (why) fields.push({ type: 'mrkdwn', text: `*Cohort*\n${why.words}` });
  if (typeof d.title === 'string') fields.push({ type: 'mrkdwn', text: `*Title*\n${slackText(d.title)}` });
  const text = `[${severity}] ${title}${where ? ` in ${where}` : ''}${why ? `, mostly ${why.name}` : ''}${current ? `: ${current}` : ''} (${slackText(event.tenant_slug)})`;
  return {
    text,
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: title } },
      { type: 'section', fields },
      {
        type: 'context',
        elements: [
          {
            type: 'mrkdwn',
            text: `<${alertsPage(dashboardUrl)}|Open the alerts in Darshak> · ${slackText(event.tenant_slug)} · ${event.created_at}`,
          },
        ],
      },
    ],
  };
}

/** Slack's answers that mean "this will never work" (bad payload, revoked or archived webhook): not retried. */
export const slackPermanent = new Set([400, 403, 404, 410]);

/** At most one message per second per Slack URL, in this process: each send takes the next free one-second slot. */
export class SlackPacer {
  private readonly next = new Map<string, number>();

  /**
   * This URL's slot (`at`, ms) and the wait for it; a wait above `maxWaitMs` is not reserved (the caller comes back
   * later).
   */
  reserve(url: string, now: number, maxWaitMs = 1000): { at: number; waitMs: number; reserved: boolean } {
    const at = Math.max(now, this.next.get(url) ?? 0);
    const waitMs = at - now;
    if (waitMs > maxWaitMs) return { at, waitMs, reserved: false };
    this.next.set(url, at + 1000);
    if (this.next.size > 10_000) for (const [u, t] of this.next) if (t < now) this.next.delete(u);
    return { at, waitMs, reserved: true };
  }
}
