import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  path: string;
  /** Real time of arrival (ms). */
  at: number;
  /** The status it was answered with (0: the connection was dropped). */
  answered?: number;
}

export interface Answer {
  /** 0 drops the connection without an answer. */
  status: number;
  headers?: Record<string, string>;
}

/**
 * A real HTTP server that records every webhook it receives and answers what `respond` says (200 by default): the
 * tests' receiver, and the soak's (docs/soak.md).
 */
export class Receiver {
  readonly received: Received[] = [];
  respond: (r: Received) => Answer = () => ({ status: 200 });
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
        const r: Received = {
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          path: req.url ?? '',
          at: Date.now(),
        };
        self?.received.push(r);
        const answer = self?.respond(r) ?? { status: 200 };
        r.answered = answer.status;
        if (answer.status === 0) req.socket.destroy();
        else res.writeHead(answer.status, answer.headers).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    self = new Receiver(server, `http://127.0.0.1:${port}`);
    return self;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
