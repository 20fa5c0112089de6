// The soak's webhook receiver: the tests' receiver, failing for a while when the fault schedule says so (alternately
// a 503 and a dropped connection), and read back as deliveries, so that the soak can count deliveries lost and
// deliveries repeated after they had succeeded.

import { Receiver } from '../webhook-receiver.js';

export interface Receipt {
  delivery: string;
  tenant: string;
  type: string;
  data: Record<string, unknown>;
  /** What the receiver answered: 200, 503, or 0 for a dropped connection. */
  answered: number;
  /** When it arrived (ms since the epoch). */
  at: number;
}

/** A delivery answered 200 and then received again. */
export interface Repeat {
  delivery: string;
  succeededAt: number;
  repeatedAt: number;
}

export class SoakReceiver {
  private failingUntil = 0;
  private failures = 0;

  private constructor(private readonly receiver: Receiver) {
    receiver.respond = () => ({ status: Date.now() >= this.failingUntil ? 200 : this.failures++ % 2 === 0 ? 503 : 0 });
  }

  static async start(): Promise<SoakReceiver> {
    return new SoakReceiver(await Receiver.start());
  }

  get url(): string {
    return this.receiver.url;
  }

  /** Fail every delivery until `until` (ms since the epoch). */
  fail(until: number): void {
    this.failingUntil = until;
  }

  /** Every delivery attempt so far, with what it was answered. */
  receipts(): Receipt[] {
    return this.receiver.received.map((r) => {
      let body: { type?: string; tenant_slug?: string; data?: Record<string, unknown> } = {};
      try {
        body = JSON.parse(r.body) as typeof body;
      } catch {
        // Kept with an empty type: the soak counts it as a delivery of nothing it expected.
      }
      return {
        delivery: String(r.headers['x-service-delivery'] ?? ''),
        tenant: body.tenant_slug ?? '',
        type: body.type ?? '',
        data: body.data ?? {},
        answered: r.answered ?? 0,
        at: r.at,
      };
    });
  }

  /** Deliveries answered 200 and then sent again: what a receiver that does not de-duplicate would count twice. */
  repeatedAfterSuccess(): Repeat[] {
    const succeeded = new Map<string, number>();
    const repeated = new Map<string, Repeat>();
    for (const r of this.receipts()) {
      const at = succeeded.get(r.delivery);
      if (at !== undefined && !repeated.has(r.delivery))
        repeated.set(r.delivery, { delivery: r.delivery, succeededAt: at, repeatedAt: r.at });
      if (r.answered === 200 && at === undefined) succeeded.set(r.delivery, r.at);
    }
    return [...repeated.values()];
  }

  close(): Promise<void> {
    return this.receiver.close();
  }
}
