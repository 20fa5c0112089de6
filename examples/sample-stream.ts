import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The sample stream, made when needed (by the player tests and `npm run try:web`): a test pattern in two renditions,
// cut into 2-second fMP4 segments that both an HLS master playlist and a DASH manifest describe (ffmpeg's dash muxer
// writes both).

/** A stream on disk: `master.m3u8` (HLS) and `manifest.mpd` (DASH) over the same segments, and `progressive.mp4`. */
export function makeStream(seconds: number): Stream {
  const dir = mkdtempSync(join(tmpdir(), 'darshak-media-'));
  const r = spawnSync(
    'ffmpeg',
    [
      ...[
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-f',
        'lavfi',
        '-i',
        'testsrc2=size=640x360:rate=25',
        '-t',
        String(seconds),
      ],
      ...['-filter_complex', '[0:v]split=2[hi][x];[x]scale=320:180[lo]', '-map', '[hi]', '-map', '[lo]'],
      ...[
        '-c:v',
        'libx264',
        '-preset',
        'ultrafast',
        '-profile:v',
        'baseline',
        '-pix_fmt',
        'yuv420p',
        '-b:v:0',
        '900k',
        '-b:v:1',
        '250k',
      ],
      ...['-g', '50', '-keyint_min', '50', '-sc_threshold', '0'],
      ...[
        '-f',
        'dash',
        '-seg_duration',
        '2',
        '-use_template',
        '1',
        '-use_timeline',
        '0',
        '-hls_playlist',
        '1',
        '-adaptation_sets',
        'id=0,streams=v',
        'manifest.mpd',
      ],
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  if (r.status !== 0 || !existsSync(join(dir, 'master.m3u8')))
    throw new Error(`ffmpeg could not make the test stream: ${r.error?.message ?? r.stderr}`);
  // The same pattern as one progressive MP4 (index first), for a plain <video> without a player library.
  const mp4 = spawnSync(
    'ffmpeg',
    [
      ...[
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-f',
        'lavfi',
        '-i',
        'testsrc2=size=320x180:rate=25',
        '-t',
        String(seconds),
      ],
      ...[
        '-c:v',
        'libx264',
        '-preset',
        'ultrafast',
        '-profile:v',
        'baseline',
        '-pix_fmt',
        'yuv420p',
        '-movflags',
        '+faststart',
        'progressive.mp4',
      ],
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  if (mp4.status !== 0) throw new Error(`ffmpeg could not make the test MP4: ${mp4.error?.message ?? mp4.stderr}`);
  return { dir, seconds, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Stream {
  dir: string;
  /** How long the stream plays. */
  seconds: number;
  remove(): void;
}
