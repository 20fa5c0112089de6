import { spawnSync } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';

// Video for the player tests, made at test time: a test pattern in two renditions, cut into 2-second fMP4
// segments that both an HLS master playlist and a DASH manifest describe (ffmpeg's dash muxer writes both).

/** A stream on disk: `master.m3u8` (HLS) and `manifest.mpd` (DASH) over the same segments, and `progressive.mp4`. */
export function makeStream(seconds: number): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'darshak-media-'));
  const r = spawnSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=640x360:rate=25', '-t', String(seconds)],
      ...['-filter_complex', '[0:v]split=2[hi][x];[x]scale=320:180[lo]', '-map', '[hi]', '-map', '[lo]'],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-profile:v', 'baseline', '-pix_fmt', 'yuv420p', '-b:v:0', '900k', '-b:v:1', '250k'],
      ...['-g', '50', '-keyint_min', '50', '-sc_threshold', '0'],
      ...['-f', 'dash', '-seg_duration', '2', '-use_template', '1', '-use_timeline', '0', '-hls_playlist', '1', '-adaptation_sets', 'id=0,streams=v', 'manifest.mpd'],
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  if (r.status !== 0 || !existsSync(join(dir, 'master.m3u8'))) throw new Error(`ffmpeg could not make the test stream: ${r.error?.message ?? r.stderr}`);
  // The same pattern as one progressive MP4 (index first), for a plain <video> without a player library.
  const mp4 = spawnSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x180:rate=25', '-t', String(seconds)],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-profile:v', 'baseline', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', 'progressive.mp4'],
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  if (mp4.status !== 0) throw new Error(`ffmpeg could not make the test MP4: ${mp4.error?.message ?? mp4.stderr}`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

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
 * segments and not another's), player libraries under `/lib/<name>`, and pages under `/page/<name>`.
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

  static async start(mediaDir: string, libs: Record<string, string>): Promise<MediaServer> {
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
        res.writeHead(200, { 'content-type': types[extname(name)] ?? 'application/octet-stream', 'content-length': statSync(file).size });
        createReadStream(file).pipe(res);
      };
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

  /** Hold this viewer's segment answers until `release`: its player starves once its buffer runs out. */
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
