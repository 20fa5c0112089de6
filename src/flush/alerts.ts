import { AckPolicy, DeliverPolicy, type JsMsg } from 'nats';
import { ensureAlertStream } from '../contracts/alert-rows.js';
import type { Bus } from '../bus/bus.js';
import { consumeLoop, type ConsumeLoop } from '../bus/consume-loop.js';
import type { Logger } from '../log.js';
import { insertAlerts, type AlertRow } from '../store/alerts.js';
import type { Store } from '../store/store.js';

/**
 * Stores the alert versions the alerts role publishes (it talks only to NATS). One message is one version; the
 * token names it, so a redelivered message stores nothing twice, and acknowledgement follows the insert.
 */
export class AlertWriter {
  private loop: ConsumeLoop | undefined;
  private readonly log: Logger;

  constructor(
    private readonly bus: Bus,
    private readonly store: Store,
    log: Logger,
  ) {
    this.log = log.child({ module: 'flush-alerts' });
  }

  async start(): Promise<void> {
    await ensureAlertStream(this.bus);
    await this.bus.ensureConsumer(this.bus.names.alertsStream, {
      durable_name: 'flush-alerts',
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 30_000_000_000,
      max_ack_pending: 100,
    });
    const consumer = await this.bus.js.consumers.get(this.bus.names.alertsStream, 'flush-alerts');
    this.loop = consumeLoop({
      bus: this.bus,
      open: async () => consumer,
      readAhead: { messages: 100 },
      handle: (m) => this.write(m),
      log: this.log,
      onFailure: 'storing alerts failed; they will come again',
    });
  }

  private async write(m: JsMsg): Promise<void> {
    let row: AlertRow;
    try {
      row = JSON.parse(m.string()) as AlertRow;
    } catch {
      this.log.warn({ seq: m.seq }, 'unreadable alert version dropped');
      m.term();
      return;
    }
    await insertAlerts(this.store.client, [row], `alert:${row.tenant}:${row.id}:${row.version}`);
    m.ack();
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
  }
}
