import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { JsMsg, KV, ObjectStore } from 'nats';
import { Counter, Gauge } from 'prom-client';
import { quotaFinding, quotaLevels } from '../../pipelines/quota/pipeline.js';
import type { Bus } from '../bus/bus.js';
import { packCheckpoint, readCheckpoint, writeCheckpoint } from '../bus/checkpoints.js';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import { ensureAlertStream } from '../contracts/alert-rows.js';
import { decodeSignals, type SignalMessage } from '../bus/wire.js';
import { sha256Hex } from '../control/kv-records.js';
import { plans } from '../control/plans.js';
import type { TenantRecord } from '../control/records.js';
import { monthOf, type UsageCounters } from '../control/usage.js';
import type { WatchedMap } from '../control/watched-map.js';
import type { Logger } from '../log.js';
import { registry } from '../metrics.js';
import type { Alert, AlertRow } from '../store/alerts.js';
import { publishWebhookEvent } from '../contracts/webhook-events.js';
import {
  alertIdentity,
  alertRow,
  Detection,
  freshMs,
  type AlertChange,
  type SavedDetection,
  type Sighting,
} from './engine.js';
import { detectors, effective, type Thresholds } from '../metric/thresholds.js';

const raisedTotal = new Counter({
  name: 'darshak_alerts_raised_total',
  help: 'Alerts raised, by category',
  labelNames: ['category'] as const,
  registers: [registry],
});

const openGauge = new Gauge({
  name: 'darshak_alerts_open_incidents',
  help: 'Incidents open in the active alerts process',
  registers: [registry],
});

export interface AlertsOptions {
  thresholds: Thresholds;
  /** How often the detection state is checkpointed. */
  checkpointEveryMs: number;
  /** How often the active process publishes its clock tick (time passes for resolution without traffic). */
  tickMs: number;
  /** How long a lease lasts without renewal; a standby takes over after it. */
  leaseMs: number;
  /** DetectionOptions.maxPerHour and maxKeys (ALERTS_MAX_PER_HOUR, ALERTS_MAX_KEYS). */
  maxPerHour: number;
  maxKeys: number;
}

interface Checkpoint {
  v: 2;
  seq: number;
  detection: SavedDetection;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The alert as the API and the live feed show it. */
export function alertView(row: AlertRow): Alert {
  return {
    id: row.id,
    severity: row.severity,
    source: row.source,
    category: row.category,
    title: row.title,
    description: row.description,
    data: row.data,
    acknowledged: false,
    acknowledged_at: null,
    created_at: iso(row.created_at),
    resolved_at: row.resolved_at === null ? null : iso(row.resolved_at),
  };
}

/**
 * The `alerts` role: one active process per cluster, chosen by a lease in KV; the others wait to take over. The
 * active one reads the signals stream in order (from its checkpoint), runs the detection engine, and for each alert
 * version publishes the row (stored by the flush role), the webhook event (delivered by the webhooks role) and the
 * live push. Quota alerts come from ingest's shared monthly counter instead of signals.
 */
export class AlertsService {
  private readonly log: Logger;
  /** Who holds the lease, as the lease says: host, pid and a random part (a restarted pid is someone else). */
  private readonly owner = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  private leaseRevision = 0;
  private leading = false;
  private detection: Detection | undefined;
  private loop: ConsumeLoop | undefined;
  private seq = 0;
  private lastCheckpoint = 0;
  private timers: NodeJS.Timeout[] = [];
  /** Serialises leadership changes, ticks and quota checks with each other. */
  private chain: Promise<void> = Promise.resolve();
  private readonly quotaSeen = new Set<string>();
  private stopped = false;
  /** A message's changes may not all be out: the state is restored from the checkpoint before reading again. */
  private failed = false;

  private constructor(
    private readonly bus: Bus,
    private readonly tenants: WatchedMap<TenantRecord>,
    private readonly usage: UsageCounters,
    private readonly lease: KV,
    private readonly marks: KV,
    private readonly store: ObjectStore,
    private readonly options: AlertsOptions,
    log: Logger,
  ) {
    this.log = log.child({ module: 'alerts' });
  }

  static async start(
    bus: Bus,
    tenants: WatchedMap<TenantRecord>,
    usage: UsageCounters,
    options: AlertsOptions,
    log: Logger,
  ): Promise<AlertsService> {
    await ensureAlertStream(bus);
    const [lease, marks, store] = await Promise.all([
      bus.kv(bus.names.alertsLeaseBucket, options.leaseMs),
      bus.kv(bus.names.alertMarksBucket),
      bus.objectStore(bus.names.checkpointBucket),
    ]);
    const s = new AlertsService(bus, tenants, usage, lease, marks, store, options, log);
    await s.campaign();
    const every = (ms: number, fn: () => Promise<void>): void => {
      const t = setInterval(() => {
        s.chain = s.chain
          .then(fn)
          .catch((err: Error) => s.log.warn({ err: err.message }, 'alerts housekeeping failed'));
      }, ms);
      s.timers.push(t);
    };
    every(Math.max(250, Math.floor(options.leaseMs / 4)), () => s.campaign());
    every(options.tickMs, () => s.publishTick());
    every(1000, () => s.checkQuotas());
    return s;
  }

  /** Take or renew the lease; start or stop leading accordingly. */
  private async campaign(): Promise<void> {
    if (this.stopped) return;
    try {
      this.leaseRevision = this.leading
        ? await this.lease.update('leader', this.owner, this.leaseRevision)
        : await this.lease.create('leader', this.owner);
      if (!this.leading) await this.lead();
    } catch {
      if (this.leading) {
        this.log.warn('alerts lease lost; standing by');
        await this.standDown();
      }
    }
  }

  private async lead(): Promise<void> {
    await this.restore();
    this.leading = true;
    this.log.info({ from_seq: this.seq + 1, open_incidents: this.detection!.openIncidents }, 'alerts: leading');
    this.loop = consumeLoop({
      bus: this.bus,
      // Reopened after a failure from the last checkpoint: the failed message's changes were applied to the state
      // but perhaps not published, and a shard's batch is applied once.
      open: async () => {
        if (this.failed) await this.restore();
        return this.bus.reader(this.bus.names.signalsStream, undefined, this.seq > 0 ? { seq: this.seq + 1 } : 'all');
      },
      ordered: true,
      // A batch's signals of a large audience are tens of KB.
      readAhead: { bytes: this.bus.readAheadBytes },
      handle: (m) => this.handle(m),
      log: this.log,
      onFailure: 'alerts: handling signals failed; reading again from the last checkpoint',
    });
  }

  /** The detection state of the last checkpoint (or none), and where reading resumes. */
  private async restore(): Promise<void> {
    this.failed = false;
    const detection = new Detection({
      detectors,
      thresholds: (tenant, category) =>
        effective(this.options.thresholds, this.tenants.get(tenant)?.alert_thresholds, category),
      maxPerHour: this.options.maxPerHour,
      maxKeys: this.options.maxKeys,
    });
    const cp = await this.loadCheckpoint();
    if (cp) detection.load(cp.detection);
    // Replayed input raises nothing that would be old news by now: those alerts went out before.
    detection.quietBefore = Date.now() - freshMs;
    this.detection = detection;
    this.seq = cp?.seq ?? 0;
  }

  private async standDown(): Promise<void> {
    this.leading = false;
    await this.loop?.stop();
    this.loop = undefined;
    this.detection = undefined;
  }

  private async handle(m: JsMsg): Promise<void> {
    const detection = this.detection;
    if (!detection || m.seq <= this.seq) return;
    try {
      await this.step(detection, m);
    } catch (err) {
      this.failed = true;
      throw err;
    }
  }

  private async step(detection: Detection, m: JsMsg): Promise<void> {
    if (m.subject === this.bus.names.signalsTickSubject) {
      await this.emit(detection.tick(Number(m.string())));
    } else {
      let message: SignalMessage;
      try {
        message = decodeSignals(m.data);
      } catch {
        this.log.warn({ seq: m.seq }, 'unreadable signals message skipped');
        this.seq = m.seq;
        return;
      }
      const { changes, sightings } = detection.apply(message);
      await this.emit(changes);
      for (const s of sightings) await this.sighted(s, detection);
    }
    this.seq = m.seq;
    openGauge.set(detection.openIncidents);
    if (Date.now() - this.lastCheckpoint >= this.options.checkpointEveryMs) await this.checkpoint();
  }

  /**
   * A first sighting: raised unless the cluster's once-mark says it was seen before; old news only takes the mark.
   * It counts against the tenant's hourly cap only once the mark says it is new, so re-sighting old titles costs none.
   */
  private async sighted(s: Sighting, detection: Detection): Promise<void> {
    const mark = s.detector.mark(s.key);
    const { id, eventId } = alertIdentity(s.tenant, s.detector.category, mark);
    const { category, source } = s.detector;
    await this.once(`once.${s.tenant}.${sha256Hex(`${category}\n${mark}`).slice(0, 32)}`, () => {
      if (!s.fresh) return Promise.resolve();
      const changes: AlertChange[] = [];
      if (detection.budget.take(s.tenant, category, source, detection.clock, changes)) {
        changes.push({
          row: alertRow(s.tenant, id, category, source, s.detector.finding(s.key, s.fields), detection.clock),
          raised: true,
          eventId,
        });
      }
      return this.emit(changes);
    });
  }

  /**
   * Do `raise` unless the once-mark `key` exists, then take the mark. In that order, a crash between the two raises
   * again on the next try, with the same ids (stored once, delivered once within the hour's duplicate window);
   * the other order would lose the alert.
   */
  private async once(key: string, raise: () => Promise<void>): Promise<void> {
    const e = await this.marks.get(key);
    if (e && e.operation === 'PUT') return;
    await raise();
    await this.marks.create(key, new TextEncoder().encode(iso(Date.now()))).catch((err: Error) => {
      if (!/wrong last sequence|key exists/i.test(err.message)) throw err;
    });
  }

  /** Store, deliver and push alert versions. Ids are fixed by the incident, so publishing one again stores and sends nothing new. */
  private async emit(changes: readonly AlertChange[]): Promise<void> {
    for (const c of changes) {
      const { row } = c;
      await this.bus.js.publish(this.bus.names.alertRowsSubject(row.tenant), JSON.stringify(row), {
        msgID: `alert:${row.id}:${row.version}`,
      });
      if (!c.raised) continue;
      raisedTotal.inc({ category: row.category });
      this.log.info({ tenant: row.tenant, category: row.category, id: row.id, severity: row.severity }, 'alert raised');
      await publishWebhookEvent(this.bus, {
        id: c.eventId,
        type: row.category,
        created_at: iso(row.created_at),
        tenant_slug: row.tenant,
        data: row.data,
      });
      this.bus.nc.publish(this.bus.names.alertsLiveSubject(row.tenant), JSON.stringify(alertView(row)));
    }
  }

  private async publishTick(): Promise<void> {
    if (this.leading) await this.bus.js.publish(this.bus.names.signalsTickSubject, String(Date.now()));
  }

  /** ingest.quota_80pct / quota_exceeded: once per tenant, level and UTC month, from ingest's shared counter. */
  private async checkQuotas(): Promise<void> {
    if (!this.leading) return;
    const now = Date.now();
    const period = monthOf(now);
    for (const t of this.tenants.values()) {
      const quota = t.monthly_quota ?? plans[t.plan].monthly_events;
      const used = this.usage.monthUsed(t.slug, now);
      for (const level of quotaLevels) {
        const key = `quota.${t.slug}.${period}.${level.category}`;
        if (used < level.share * quota || this.quotaSeen.has(key)) continue;
        const { id, eventId } = alertIdentity(t.slug, level.category, period);
        await this.once(key, () =>
          this.emit([
            {
              row: alertRow(t.slug, id, level.category, 'ingest', quotaFinding(level, used, quota, period), now),
              raised: true,
              eventId,
            },
          ]),
        );
        this.quotaSeen.add(key);
      }
    }
  }

  private loadCheckpoint(): Promise<Checkpoint | null> {
    return readCheckpoint<Checkpoint>(this.store, 'alerts', (cp) => cp.v === 2 && cp.detection.v === 3, this.log);
  }

  private async checkpoint(): Promise<void> {
    if (!this.detection) return;
    this.lastCheckpoint = Date.now();
    const cp: Checkpoint = { v: 2, seq: this.seq, detection: this.detection.save() };
    await writeCheckpoint(this.store, 'alerts', packCheckpoint(cp), this.log);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await this.chain;
    if (!this.leading) return;
    await this.loop?.stop();
    await this.checkpoint();
    this.leading = false;
    // Hand over at once rather than after the lease runs out.
    await this.lease.delete('leader').catch(() => undefined);
  }
}
