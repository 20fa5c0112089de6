import { randomBytes } from 'node:crypto';
import type { Consumer, JsMsg } from 'nats';
import { Counter, Histogram } from 'prom-client';
import type { Bus } from '../bus/bus.js';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import type { ControlPlane } from '../control/control-plane.js';
import { ControlError } from '../control/kv-records.js';
import { suspended, type TenantRecord, type WebhookRecord } from '../control/records.js';
import { WatchedMap } from '../control/watched-map.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import { deliveryId, targetHeader, type WebhookEvent } from '../contracts/webhook-events.js';
import { appendLog, type AttemptLog } from '../contracts/webhook-log.js';
import { ensureWebhookStreams, type DeliveryMessage } from '../contracts/webhook-streams.js';
import { AddressGuard } from '../http/ssrf.js';
import { AttemptsMade } from './attempts-made.js';
import { ensureWebhookConsumers } from './consumers.js';
import type { Mailer } from './mailer.js';
import { maxAttempts, parseRetryAfter, retryDelayMs, systemClock, type Clock } from './schedule.js';
import { postOnce } from './send.js';
import { deliveryHeaders } from './sign.js';
import { slackMessage, slackPermanent, SlackPacer } from './slack.js';

const attempts = new Counter({
  name: 'darshak_webhook_attempts_total',
  help: 'Webhook delivery attempts, by outcome (succeeded, failed, refused by the SSRF guard)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
const attemptLatency = new Histogram({
  name: 'darshak_webhook_attempt_seconds',
  help: 'Time of one webhook delivery attempt, DNS to the end of the answer',
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});
const disabledTotal = new Counter({
  name: 'darshak_webhook_endpoints_disabled_total',
  help: 'Webhook endpoints disabled after the last attempt of a delivery failed',
  registers: [registry],
});

export interface WebhookServiceOptions {
  clock: Clock;
  random: () => number;
  /** Deadline of one attempt, everything included (the seed: 5 s). */
  timeoutMs: number;
  /** Attempts in flight in this process, at most. */
  concurrency: number;
  /** A parked retry wakes at least this often to look at the clock again (tests with a moved clock keep it small). */
  maxParkMs: number;
  /**
   * How long the writes after an attempt (its retry, its record, its log entry) are tried again before the message is
   * left to come again; under the deliveries' 60 s ack wait, which the tries extend.
   */
  writeRetryMs: number;
  /** How often deliveries held for endpoints enabled again are released. */
  releaseIntervalMs: number;
  allowHosts: readonly string[];
  /** Where the Slack message's link points. */
  dashboardUrl: string;
}

export const defaultServiceOptions: Omit<WebhookServiceOptions, 'allowHosts' | 'dashboardUrl'> = {
  clock: systemClock,
  random: Math.random,
  timeoutMs: 5000,
  concurrency: 64,
  maxParkMs: 3_600_000,
  writeRetryMs: 50_000,
  releaseIntervalMs: 1000,
};

const decoder = new TextDecoder();
/** Events being fanned out at once, at most. */
const maxFanOutInflight = 128;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What to do with a delivery message after looking at it, before any network. */
type Step =
  | { kind: 'drop'; why: string }
  | { kind: 'hold'; endpoint: WebhookRecord }
  | { kind: 'park'; ms: number }
  | { kind: 'send'; endpoint: WebhookRecord };

/**
 * The webhooks role: fans events out to the subscribed endpoints, makes each attempt (signed, with a hard deadline,
 * behind the SSRF guard), schedules retries, holds deliveries of disabled endpoints and logs every attempt
 * (docs/webhooks.md).
 */
export class WebhookService {
  private readonly log: Logger;
  private readonly guard: AddressGuard;
  private readonly pacer = new SlackPacer();
  /** The attempts in flight, by their message's sequence in the deliveries stream. */
  private readonly inflight = new Map<number, Promise<void>>();
  private readonly fanning = new Set<Promise<void>>();
  private readonly loops: ConsumeLoop[] = [];
  private releaseTimer: NodeJS.Timeout | undefined;
  private releasing: Promise<void> = Promise.resolve();
  /** When stop() was called; null while running. */
  private stoppedAt: number | null = null;

  private constructor(
    private readonly bus: Bus,
    private readonly control: ControlPlane,
    private readonly endpoints: WatchedMap<WebhookRecord>,
    private readonly tenants: WatchedMap<TenantRecord>,
    private readonly made: AttemptsMade,
    private readonly mailer: Mailer,
    private readonly options: WebhookServiceOptions,
    log: Logger,
  ) {
    this.log = log.child({ module: 'webhooks' });
    this.guard = new AddressGuard(options.allowHosts);
  }

  static async start(
    bus: Bus,
    control: ControlPlane,
    mailer: Mailer,
    log: Logger,
    options: Partial<WebhookServiceOptions> & Pick<WebhookServiceOptions, 'allowHosts' | 'dashboardUrl'>,
  ): Promise<WebhookService> {
    await ensureWebhookStreams(bus);
    await ensureWebhookConsumers(bus);
    const [endpoints, tenants, made] = await Promise.all([
      WatchedMap.open<WebhookRecord>(control.webhooks.kv, bus, log, (_k, v) => v.id),
      WatchedMap.open<TenantRecord>(control.tenants, bus, log),
      AttemptsMade.open(bus),
    ]);
    const service = new WebhookService(
      bus,
      control,
      endpoints,
      tenants,
      made,
      mailer,
      { ...defaultServiceOptions, ...options },
      log,
    );
    service.run();
    return service;
  }

  private run(): void {
    const n = this.bus.names;
    const open = (stream: string, durable: string) => (): Promise<Consumer> =>
      this.bus.js.consumers.get(stream, durable);
    this.loops.push(
      consumeLoop({
        bus: this.bus,
        open: open(n.webhookEventsStream, 'webhooks-fanout'),
        readAhead: { messages: 256 },
        handle: (m) => this.fanOutAsync(m),
        log: this.log,
        onFailure: 'webhook fan-out failed; the event comes again',
      }),
      consumeLoop({
        bus: this.bus,
        open: open(n.webhookDeliveriesStream, 'webhooks-new'),
        readAhead: { messages: 64 },
        handle: (m) => this.handle(m),
        log: this.log,
        onFailure: 'webhook delivery read failed',
      }),
      consumeLoop({
        bus: this.bus,
        open: open(n.webhookDeliveriesStream, 'webhooks-retry'),
        readAhead: { messages: 256 },
        handle: (m) => this.handle(m),
        log: this.log,
        onFailure: 'webhook retry read failed',
      }),
    );
    const tick = (): void => {
      this.releasing = this.releaseHeld()
        .catch((err: Error) => this.log.warn({ err: err.message }, 'releasing held deliveries failed; trying again'))
        .finally(() => {
          if (this.stoppedAt === null) this.releaseTimer = setTimeout(tick, this.options.releaseIntervalMs);
        });
    };
    this.releaseTimer = setTimeout(tick, this.options.releaseIntervalMs);
  }

  // ---- fan-out: one event, one delivery message per subscribed endpoint ----

  /** Events are independent: several are fanned out at once (each waits for its publishes), up to a bound. */
  private async fanOutAsync(m: JsMsg): Promise<void> {
    const p = this.fanOut(m)
      .catch((err: Error) => {
        // Not acknowledged: the event comes again after the ack wait; its deliveries' message ids make that harmless.
        this.log.warn({ err: err.message, seq: m.seq }, 'webhook fan-out failed; the event comes again');
      })
      .finally(() => this.fanning.delete(p));
    this.fanning.add(p);
    if (this.fanning.size >= maxFanOutInflight) await Promise.race(this.fanning);
  }

  private async fanOut(m: JsMsg): Promise<void> {
    let event: WebhookEvent;
    try {
      event = JSON.parse(decoder.decode(m.data)) as WebhookEvent;
      if (typeof event.id !== 'string' || typeof event.type !== 'string' || typeof event.tenant_slug !== 'string')
        throw new Error('not a webhook event');
    } catch (err) {
      this.log.error({ err: (err as Error).message, seq: m.seq }, 'unreadable webhook event dropped');
      m.term();
      return;
    }
    const target = m.headers?.get(targetHeader);
    let endpoints: WebhookRecord[];
    if (target) {
      // Read from the bucket, not the watched copy: the test ping often follows the endpoint's creation at once.
      const one = await this.control.webhooks.get(event.tenant_slug, target).catch((err: unknown) => {
        if (err instanceof ControlError) return null;
        throw err;
      });
      endpoints = one ? [one] : [];
    } else {
      endpoints = this.endpoints
        .values()
        .filter((e) => e.tenant === event.tenant_slug && (e.categories as readonly string[]).includes(event.type));
    }
    const raw = decoder.decode(m.data);
    await Promise.all(
      endpoints.map((e) => {
        const id = deliveryId(event.id, e.id);
        const body = e.format === 'slack' ? JSON.stringify(slackMessage(event, this.options.dashboardUrl)) : raw;
        const msg: DeliveryMessage = {
          delivery_id: id,
          endpoint_id: e.id,
          tenant: e.tenant,
          event_id: event.id,
          type: event.type,
          body,
          attempt: 1,
          not_before: null,
        };
        // The delivery id as message id: an event fanned out twice (a redelivery) makes one delivery.
        return this.bus.js.publish(this.bus.names.webhookDeliverySubject('new', e.id), JSON.stringify(msg), {
          msgID: id,
        });
      }),
    );
    m.ack();
  }

  // ---- delivery ----

  /** The endpoint from the watched copy; from the bucket when the copy has not seen it yet (created a moment ago). */
  private async endpointOf(msg: DeliveryMessage): Promise<WebhookRecord | null> {
    const known = this.endpoints.get(msg.endpoint_id);
    if (known) return known;
    return this.control.webhooks.get(msg.tenant, msg.endpoint_id).catch((err: unknown) => {
      if (err instanceof ControlError) return null;
      throw err;
    });
  }

  /** Whether an endpoint takes deliveries now: enabled, and its tenant not suspended. */
  private open(endpoint: WebhookRecord): boolean {
    return endpoint.enabled && !suspended(this.tenants.get(endpoint.tenant));
  }

  private decide(msg: DeliveryMessage, endpoint: WebhookRecord | null): Step {
    if (!endpoint || endpoint.tenant !== msg.tenant) return { kind: 'drop', why: 'endpoint deleted' };
    if (!this.open(endpoint)) return { kind: 'hold', endpoint };
    const now = this.options.clock.now();
    if (msg.not_before !== null && msg.not_before > now)
      return { kind: 'park', ms: Math.max(1, Math.min(msg.not_before - now, this.options.maxParkMs)) };
    return { kind: 'send', endpoint };
  }

  private async handle(m: JsMsg): Promise<void> {
    let msg: DeliveryMessage;
    try {
      msg = JSON.parse(decoder.decode(m.data)) as DeliveryMessage;
    } catch {
      this.log.error({ seq: m.seq }, 'unreadable delivery message dropped');
      m.term();
      return;
    }
    const step = this.decide(msg, await this.endpointOf(msg));
    if (step.kind === 'drop') {
      m.ack();
      return;
    }
    if (step.kind === 'park') {
      // Stays pending on the retry consumer, which allows many pending (consumers.ts): new deliveries are not held up.
      m.nak(step.ms);
      return;
    }
    if (step.kind === 'hold') {
      await this.hold(msg, m.seq);
      m.ack();
      return;
    }
    // Sent again while this process still writes down its attempt (a NATS server restarted meanwhile): that attempt
    // acknowledges it.
    if (this.inflight.has(m.seq)) return;
    const p = this.attemptOnce(m, msg, step.endpoint)
      .catch((err: Error) => {
        // Not acknowledged: the message comes again after the ack wait, and the attempt is made again.
        this.log.error({ err: err.message, delivery: msg.delivery_id }, 'webhook attempt could not be recorded');
      })
      .finally(() => this.inflight.delete(m.seq));
    this.inflight.set(m.seq, p);
    if (this.inflight.size >= this.options.concurrency) await Promise.race(this.inflight.values());
  }

  private async attemptOnce(m: JsMsg, msg: DeliveryMessage, endpoint: WebhookRecord): Promise<void> {
    if (!(await this.alreadyMade(m, msg))) await this.attempt(m, msg, endpoint);
  }

  /**
   * A delivery that comes again after its attempt was made, by a process that died before acknowledging it or whose
   * acknowledgement NATS lost: the attempt and its retry are done, so the receiver is not sent it twice. Its log entry
   * and what follows a last failure (disabling the endpoint) are done again; each does nothing twice.
   */
  private async alreadyMade(m: JsMsg, msg: DeliveryMessage): Promise<boolean> {
    const made = await this.made.get(m.seq);
    if (!made) return false;
    await appendLog(this.bus, msg.endpoint_id, made);
    if (made.status === 'failed' && made.next_attempt_at === null && msg.attempt >= maxAttempts)
      await this.exhausted(msg, m.seq);
    m.ack();
    return true;
  }

  /** Keep a delivery of a disabled endpoint (or a suspended tenant's) until it may go; it then starts its schedule again. */
  private async hold(msg: DeliveryMessage, seq: number): Promise<void> {
    const held: DeliveryMessage = { ...msg, attempt: 1, not_before: null };
    await this.bus.js.publish(this.bus.names.webhookHeldSubject(msg.endpoint_id), JSON.stringify(held), {
      msgID: `d${seq}:held`,
    });
  }

  private async attempt(m: JsMsg, msg: DeliveryMessage, endpoint: WebhookRecord): Promise<void> {
    if (endpoint.format === 'slack') {
      const slot = this.pacer.reserve(endpoint.url, Date.now());
      if (!slot.reserved) {
        // Past a second of waiting, give the slot back to the stream rather than hold a worker.
        m.nak(slot.waitMs);
        return;
      }
      // A timer counts from the event loop's cached time, which a long tick leaves behind the clock: it can fire some
      // milliseconds before the slot (a CI run sent two 997 ms apart), so the clock is read again.
      for (let left = slot.waitMs; left > 0; left = slot.at - Date.now()) await sleep(left);
    }
    const now = this.options.clock.now();
    const headers = deliveryHeaders(endpoint, msg.delivery_id, msg.body, now);
    const result = await postOnce(new URL(endpoint.url), msg.body, headers, this.guard, this.options.timeoutMs);
    attempts.inc({ outcome: result.ok ? 'succeeded' : result.refused ? 'refused' : 'failed' });
    attemptLatency.observe(result.latencyMs / 1000);
    const permanent =
      !result.ok && endpoint.format === 'slack' && result.status !== null && slackPermanent.has(result.status);
    const retryAfterMs =
      result.status === 429 || result.status === 503 ? parseRetryAfter(result.retryAfter, now) : null;
    const delay = result.ok || permanent ? null : retryDelayMs(msg.attempt, retryAfterMs, this.options.random);
    const entry: AttemptLog = {
      id: `att_${randomBytes(10).toString('hex')}`,
      delivery_id: msg.delivery_id,
      event_id: msg.event_id,
      type: msg.type,
      attempt: msg.attempt,
      status: result.ok ? 'succeeded' : 'failed',
      response_code: result.status,
      latency_ms: result.latencyMs,
      error: result.error,
      request_body: msg.body,
      created_at: new Date(now).toISOString(),
      next_attempt_at: delay === null ? null : new Date(now + delay).toISOString(),
    };
    // The attempt is made: given up here, its message would come again and the receiver would have it twice, so the
    // writes after it are tried again through a NATS outage, each safe to repeat (message ids, a key's put).
    await this.untilWritten(m, async () => {
      if (delay !== null) {
        const next: DeliveryMessage = { ...msg, attempt: msg.attempt + 1, not_before: now + delay };
        await this.bus.js.publish(
          this.bus.names.webhookDeliverySubject('retry', msg.endpoint_id),
          JSON.stringify(next),
          { msgID: `d${m.seq}:retry` },
        );
      }
      // The retry first: a recorded attempt is not made again, so its retry must exist by then. The log entry may go
      // beside the record, since a redelivery writes it again (de-duplicated).
      await Promise.all([this.made.record(m.seq, entry), appendLog(this.bus, msg.endpoint_id, entry)]);
    });
    if (!result.ok && !permanent && delay === null && msg.attempt >= maxAttempts) await this.exhausted(msg, m.seq);
    if (!result.ok)
      this.log.info(
        {
          delivery: msg.delivery_id,
          endpoint: msg.endpoint_id,
          attempt: msg.attempt,
          status: result.status,
          error: result.error,
        },
        'webhook attempt failed',
      );
    m.ack();
  }

  /**
   * Run `write` until it succeeds, for up to `writeRetryMs` (10 s once the service is stopping), keeping the message
   * from being sent to another process meanwhile; then the failure is the caller's.
   */
  private async untilWritten(m: JsMsg, write: () => Promise<void>): Promise<void> {
    const started = Date.now();
    for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
      try {
        return await write();
      } catch (err) {
        const deadline = Math.min(
          started + this.options.writeRetryMs,
          this.stoppedAt === null ? Infinity : this.stoppedAt + 10_000,
        );
        if (Date.now() + wait > deadline) throw err;
        this.log.warn(
          { err: (err as Error).message, seq: m.seq },
          'an attempt made could not be recorded yet; trying again',
        );
        try {
          m.working();
        } catch {
          // No connection to say it on: the ack wait runs on, and the writes are tried again meanwhile.
        }
        await sleep(wait);
      }
    }
  }

  /** The last attempt failed: disable the endpoint (the one process that does sends the one e-mail) and hold this delivery. */
  private async exhausted(msg: DeliveryMessage, seq: number): Promise<void> {
    const disabled = await this.control.webhooks.disable(msg.tenant, msg.endpoint_id).catch((err: unknown) => {
      if (err instanceof ControlError) return null;
      throw err;
    });
    if (!disabled) return;
    await this.hold(msg, seq);
    if (!disabled.changed) return;
    disabledTotal.inc();
    this.log.warn(
      { endpoint: msg.endpoint_id, tenant: msg.tenant },
      'webhook endpoint disabled after its last attempt failed',
    );
    try {
      const to = await this.control.users.ownerEmails(msg.tenant);
      if (to.length > 0)
        await this.mailer.send({
          to,
          subject: `Darshak: webhook endpoint disabled (${disabled.record.url})`,
          text: disabledNotice(disabled.record, maxAttempts),
        });
    } catch (err) {
      // Not retried: a second try could send the one notice twice.
      this.log.error(
        { err: (err as Error).message, endpoint: msg.endpoint_id },
        'the e-mail about a disabled webhook endpoint was not sent',
      );
    }
  }

  // ---- held deliveries ----

  /** Release the deliveries held for endpoints that are enabled again or whose tenant is active again; forget those of deleted endpoints. */
  private async releaseHeld(): Promise<void> {
    const n = this.bus.names;
    const info = await this.bus.jsm.streams.info(n.webhookHeldStream, { subjects_filter: '>' });
    for (const [subject, count] of Object.entries(info.state.subjects ?? {})) {
      if (count === 0 || this.stoppedAt !== null) continue;
      const id = subject.slice(subject.lastIndexOf('.') + 1);
      const endpoint = this.endpoints.get(id);
      if (endpoint && this.open(endpoint)) await this.release(subject);
      // Gone from the watched copy: make sure in the bucket (the copy may lag a new endpoint) before dropping its held.
      else if (!endpoint && !(await this.control.webhooks.exists(id))) {
        await this.bus.jsm.streams.purge(n.webhookHeldStream, { filter: subject });
      }
    }
  }

  private async release(subject: string): Promise<void> {
    const n = this.bus.names;
    const last = (await this.bus.jsm.streams.getMessage(n.webhookHeldStream, { last_by_subj: subject })).seq;
    const consumer = await this.bus.reader(n.webhookHeldStream, subject, 'all');
    let seen = 0;
    let released = 0;
    let delivered = 0;
    try {
      for (let round = 0; round < 100 && seen < last; round++) {
        const batch = await consumer.fetch({ max_messages: 500, expires: 2000 });
        for await (const h of batch) {
          // A held delivery lost on the way would be purged below unsent: give up, and the next look releases again
          // (what was published already is de-duplicated by its message id).
          if (h.info.deliverySequence !== ++delivered)
            throw new Error(`held release: delivery ${h.info.deliverySequence} after ${delivered - 1}`);
          const msg = JSON.parse(decoder.decode(h.data)) as DeliveryMessage;
          // Held seq as message id: two processes releasing at once publish each delivery once.
          await this.bus.js.publish(n.webhookDeliverySubject('new', msg.endpoint_id), JSON.stringify(msg), {
            msgID: `h${h.seq}:release`,
          });
          seen = h.seq;
          released++;
          if (seen >= last) break;
        }
        batch.stop();
      }
    } finally {
      await consumer.delete().catch(() => undefined);
    }
    if (seen > 0) await this.bus.jsm.streams.purge(n.webhookHeldStream, { filter: subject, seq: seen + 1 });
    this.log.info({ subject, released }, 'held webhook deliveries released');
  }

  /** Stop reading, finish the attempts under way (each within its deadline). */
  async stop(): Promise<void> {
    this.stoppedAt = Date.now();
    clearTimeout(this.releaseTimer);
    await Promise.all(this.loops.map((l) => l.stop()));
    await Promise.allSettled([...this.inflight.values(), ...this.fanning]);
    await this.releasing;
    this.endpoints.stop();
    this.tenants.stop();
  }
}

function disabledNotice(endpoint: WebhookRecord, attemptsMade: number): string {
  return [
    `The webhook endpoint ${endpoint.url} (${endpoint.id}) of your Darshak workspace "${endpoint.tenant}" has been disabled:`,
    `a delivery to it failed ${attemptsMade} times in a row over about 31 hours.`,
    '',
    'Deliveries for it are kept and will be sent when you enable it again',
    `(Settings, Webhooks, or PATCH /v1/webhooks/${endpoint.id} with {"enabled": true}).`,
    'The delivery log (GET /v1/webhooks/{id}/deliveries) shows the answers that failed.',
  ].join('\n');
}
