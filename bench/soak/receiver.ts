// The soak's webhook receiver: it logs every delivery attempt and what it answered, and fails for a while when the
// fault schedule says so (alternately a 503 and a dropped connection), so that the soak can count deliveries lost
// and deliveries repeated after they had succeeded.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Receipt {
  delivery: string;
  tenant: string;
  type: string;
  data: Record<string, unknown>;
  /** What the receiver answered: 200, 503, or 0 for a dropped connection. */
  answered: number;
}

export class Receiver {
  readonly receipts: Receipt[] = [];
  private failingUntil = 0;
  private failures = 0;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    let self: Receiver | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let body: { type?: string; tenant_slug?: string; data?: Record<string, unknown> } = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString()) as typeof body;
        } catch {
          // Logged with an empty type: the soak reports it as a delivery of nothing it expected.
        }
        const failing = Date.now() < self!.failingUntil;
        const answered = failing ? (self!.failures++ % 2 === 0 ? 503 : 0) : 200;
        self!.receipts.push({ delivery: String(req.headers['x-service-delivery'] ?? ''), tenant: body.tenant_slug ?? '', type: body.type ?? '', data: body.data ?? {}, answered });
        if (answered === 0) req.socket.destroy();
        else res.writeHead(answered).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    self = new Receiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return self;
  }

  /** Fail every delivery until `until` (ms since the epoch). */
  fail(until: number): void {
    this.failingUntil = until;
  }

  /** Deliveries answered 200 and then sent again: what a receiver that does not de-duplicate would count twice. */
  repeatedAfterSuccess(): string[] {
    const succeeded = new Set<string>();
    const repeated = new Set<string>();
    for (const r of this.receipts) {
      if (succeeded.has(r.delivery)) repeated.add(r.delivery);
      if (r.answered === 200) succeeded.add(r.delivery);
    }
    return [...repeated];
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}
