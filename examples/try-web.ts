// `npm run try:web -- --key <ingest key>`: a page that plays the sample stream with hls.js and Darshak's web SDK,
// loaded from ingest as a customer's page loads it, so that a new user sees a real player's session arrive in the
// dashboard (README "Try it"). Needs ffmpeg, and hls.js from the development install (`npm ci`).
import { createReadStream, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { extname, join, normalize } from 'node:path';
import { parseArgs } from 'node:util';
import { makeStream } from './sample-stream.js';

const { values: args } = parseArgs({
  options: {
    key: { type: 'string' },
    ingest: { type: 'string', default: 'http://127.0.0.1:8081' },
    port: { type: 'string', default: '8090' },
    seconds: { type: 'string', default: '120' },
  },
  strict: true,
  allowPositionals: false,
});
const port = Number(args.port);
const seconds = Number(args.seconds);
if (!args.key || !Number.isInteger(port) || port < 0 || port > 65535 || !(seconds >= 4 && seconds <= 3600)) {
  process.stderr.write(
    'usage: npm run try:web -- --key <ingest key> [--ingest http://127.0.0.1:8081] [--port 8090] [--seconds 4..3600]\n',
  );
  process.exit(2);
}
let hlsJs: string;
try {
  hlsJs = createRequire(import.meta.url).resolve('hls.js/dist/hls.min.js');
} catch {
  process.stderr.write('try:web plays with hls.js, a development dependency: run `npm ci` (not --omit=dev)\n');
  process.exit(1);
}
const ingest = args.ingest.replace(/\/+$/, '');
const stream = makeStream(seconds);

const page = `<!doctype html>
<meta charset="utf-8">
<title>Darshak: the web SDK on the sample stream</title>
<body style="font: 15px system-ui; margin: 2rem; max-width: 720px">
<h1>The web SDK on the sample stream</h1>
<video id="v" controls muted autoplay playsinline style="width: 100%; background: #000"></video>
<p>This page reports to <code>${ingest}</code> as <code>sample-stream</code>. Pause, seek or close it: the dashboard shows
the session within seconds. Another tab is another viewer.</p>
<script src="/lib/hls.js"></script>
<script src="${ingest}/sdk/v1/darshak.js"></script>
<script>
  const v = document.getElementById('v');
  const hls = new Hls();
  Darshak.monitor(v, {
    ingestUrl: ${JSON.stringify(ingest)},
    apiKey: ${JSON.stringify(args.key)},
    content: { id: 'sample-stream', title: 'Darshak sample stream', type: 'movie', duration_sec: ${seconds} },
    player: { hls },
  });
  hls.loadSource('/stream/master.m3u8');
  hls.attachMedia(v);
</script>
`;

const types: Record<string, string> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
};
const server = createServer((req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname;
  if (path === '/') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
  if (path === '/lib/hls.js')
    return void createReadStream(hlsJs).pipe(res.writeHead(200, { 'content-type': 'text/javascript' }));
  const file = normalize(join(stream.dir, decodeURIComponent(path.replace(/^\/stream\//, ''))));
  if (!path.startsWith('/stream/') || !file.startsWith(stream.dir) || !existsSync(file))
    return void res.writeHead(404).end();
  createReadStream(file).pipe(
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }),
  );
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(
    `The sample stream with the web SDK: http://127.0.0.1:${(server.address() as AddressInfo).port}/ (Ctrl-C stops)\n`,
  );
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    stream.remove();
  });
}
