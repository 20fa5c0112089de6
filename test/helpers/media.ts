import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import type { Stream } from '../../examples/sample-stream.js';

const types: Record<string, string> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.mpd': 'application/dash+xml',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
  '.js': 'text/javascript',
  '.html': 'text/html; charset=utf-8',
};

/**
 * Serves the stream under `/m/<viewer>/…` (each page its own viewer, so the test can starve or break one player's
 * segments and not another's), player libraries under `/lib/<name>`, and pages under `/page/<name>`. The progressive
 * MP4 goes at three times its playing rate, a tenth of a second at a time, so that holding a viewer stalls a plain
 * <video> a few seconds later as it stalls a player that fetches segments.
 */
export class MediaServer {
  /** Per held viewer, the segment answers waiting for its release. */
  private readonly held = new Map<string, Array<() => void>>();
  private readonly failing = new Set<string>();
  private readonly pages = new Map<string, string>();
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(stream: Stream, libs: Record<string, string>): Promise<MediaServer> {
    const mediaDir = stream.dir;
    let self: MediaServer | undefined;
    const server = createServer((req, res) => {
      res.setHeader('access-control-allow-origin', '*');
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      const page = /^\/page\/([\w-]+)$/.exec(path);
      if (page) {
        const html = self!.pages.get(page[1]!);
        if (html === undefined) return void res.writeHead(404).end();
        return void res.writeHead(200, { 'content-type': types['.html'] }).end(html);
      }
      const lib = /^\/lib\/([\w.-]+)$/.exec(path);
      if (lib) {
        const file = libs[lib[1]!];
        if (!file) return void res.writeHead(404).end();
        res.writeHead(200, { 'content-type': types['.js'] });
        return void createReadStream(file).pipe(res);
      }
      const media = /^\/m\/([\w-]+)\/([\w.-]+)$/.exec(path);
      if (!media) return void res.writeHead(404).end();
      const [, viewer, name] = media as unknown as [string, string, string];
      const file = normalize(join(mediaDir, name));
      if (!file.startsWith(mediaDir) || !existsSync(file)) return void res.writeHead(404).end();
      const segment = name.startsWith('chunk-');
      if (segment && self!.failing.has(viewer)) return void res.writeHead(404).end();
      const send = (): void => {
        res.writeHead(200, {
          'content-type': types[extname(name)] ?? 'application/octet-stream',
          'content-length': statSync(file).size,
        });
        createReadStream(file).pipe(res);
      };
      if (name === 'progressive.mp4') return void self!.pace(viewer, readFileSync(file), stream.seconds, res);
      const queue = segment ? self!.held.get(viewer) : undefined;
      if (queue) queue.push(send);
      else send();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new MediaServer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return self;
  }

  page(name: string, html: string): string {
    this.pages.set(name, html);
    return `${this.url}/page/${name}`;
  }

  private pace(viewer: string, body: Buffer, seconds: number, res: ServerResponse): void {
    res.writeHead(200, { 'content-type': types['.mp4'], 'content-length': body.length });
    const slice = Math.ceil((body.length / seconds) * 0.3);
    let sent = 0;
    const next = (): void => {
      if (res.destroyed || sent >= body.length) return;
      const queue = this.held.get(viewer);
      if (queue) return void queue.push(next);
      res.write(body.subarray(sent, sent + slice));
      sent += slice;
      if (sent >= body.length) res.end();
      else setTimeout(next, 100);
    };
    next();
  }

  /** Hold this viewer's segment answers and its MP4's next slice until `release`: it starves once its buffer runs out. */
  hold(viewer: string): void {
    if (!this.held.has(viewer)) this.held.set(viewer, []);
  }

  /** Send what was held for this viewer, and answer it at once again. */
  release(viewer: string): void {
    const queue = this.held.get(viewer) ?? [];
    this.held.delete(viewer);
    for (const send of queue) send();
  }

  /** Answer this viewer's segment requests 404 from now on. */
  fail(viewer: string): void {
    this.failing.add(viewer);
  }

  close(): Promise<void> {
    for (const viewer of [...this.held.keys()]) this.release(viewer);
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
