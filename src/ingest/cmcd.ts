import { createHash } from 'node:crypto';

// CMCD v2 (CTA-5004-B) event-mode reports, as players POST them to an event target: one report per line, each an
// RFC 8941 dictionary (`key=value,key,...`). docs/cmcd.md is the reference for the mapping to our events.

/** A decoded value: inner lists become arrays; parameters are dropped (no key we read has any that matter). */
export type CmcdValue = string | number | boolean | Array<string | number | boolean>;
export type CmcdReport = Record<string, CmcdValue>;

const isLcalpha = (c: number): boolean => c >= 0x61 && c <= 0x7a;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const isAlpha = (c: number): boolean => isLcalpha(c) || (c >= 0x41 && c <= 0x5a);
const keyChar = (c: number): boolean =>
  isLcalpha(c) || isDigit(c) || c === 0x5f || c === 0x2d || c === 0x2e || c === 0x2a;
// RFC 9110 tchar, plus ":" and "/" as RFC 8941 allows in tokens; a table, as every character of a token is tested.
const tokenChars = new Uint8Array(128);
for (const ch of "!#$%&'*+-.^_`|~:/0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
  tokenChars[ch.charCodeAt(0)] = 1;
const tokenChar = (c: number): boolean => c >= 0 && c < 128 && tokenChars[c] === 1;

class Cursor {
  i = 0;
  constructor(readonly s: string) {}
  /** The code unit at the cursor, -1 at the end. A method, so that TypeScript does not narrow it across moves. */
  at(): number {
    return this.i < this.s.length ? this.s.charCodeAt(this.i) : -1;
  }
  fail(what: string): never {
    throw new SyntaxError(`${what} at character ${this.i + 1}`);
  }
}

function parseKey(p: Cursor): string {
  const start = p.i;
  if (!(isLcalpha(p.at()) || p.at() === 0x2a)) p.fail('a key must start with a lowercase letter or "*"');
  while (keyChar(p.at())) p.i++;
  return p.s.slice(start, p.i);
}

function parseNumber(p: Cursor): number {
  const start = p.i;
  if (p.at() === 0x2d) p.i++;
  const intStart = p.i;
  while (isDigit(p.at())) p.i++;
  const intDigits = p.i - intStart;
  if (intDigits === 0) p.fail('a number needs a digit');
  if (p.at() !== 0x2e) {
    if (intDigits > 15) p.fail('an integer has at most 15 digits');
    return Number(p.s.slice(start, p.i));
  }
  if (intDigits > 12) p.fail('a decimal has at most 12 digits before the point');
  p.i++;
  const fracStart = p.i;
  while (isDigit(p.at())) p.i++;
  const fracDigits = p.i - fracStart;
  if (fracDigits < 1 || fracDigits > 3) p.fail('a decimal has 1 to 3 digits after the point');
  return Number(p.s.slice(start, p.i));
}

function parseString(p: Cursor): string {
  p.i++; // the opening quote
  let out = '';
  let from = p.i;
  for (;;) {
    const c = p.at();
    if (c === -1) p.fail('a string is not closed');
    if (c === 0x22) {
      out += p.s.slice(from, p.i);
      p.i++;
      return out;
    }
    if (c === 0x5c) {
      out += p.s.slice(from, p.i);
      p.i++;
      if (p.at() !== 0x22 && p.at() !== 0x5c) p.fail('a string may escape only " and \\');
      out += p.s[p.i];
      p.i++;
      from = p.i;
      continue;
    }
    if (c < 0x20 || c > 0x7e) p.fail('a string holds printable ASCII only');
    p.i++;
  }
}

function parseBareItem(p: Cursor): string | number | boolean {
  const c = p.at();
  if (c === 0x2d || isDigit(c)) return parseNumber(p);
  if (c === 0x22) return parseString(p);
  if (c === 0x3f) {
    p.i++;
    const b = p.at();
    if (b !== 0x30 && b !== 0x31) p.fail('a boolean is ?0 or ?1');
    p.i++;
    return b === 0x31;
  }
  if (isAlpha(c) || c === 0x2a) {
    const start = p.i;
    while (tokenChar(p.at())) p.i++;
    return p.s.slice(start, p.i);
  }
  if (c === 0x3a) {
    // A byte sequence: no CMCD key carries one; read past it as its text.
    const start = ++p.i;
    while (p.at() !== 0x3a) {
      if (p.at() === -1) p.fail('a byte sequence is not closed');
      p.i++;
    }
    return p.s.slice(start, p.i++);
  }
  return p.fail('expected a value');
}

function skipParameters(p: Cursor): void {
  while (p.at() === 0x3b) {
    p.i++;
    while (p.at() === 0x20) p.i++;
    parseKey(p);
    if (p.at() === 0x3d) {
      p.i++;
      parseBareItem(p);
    }
  }
}

function parseInnerList(p: Cursor): Array<string | number | boolean> {
  p.i++; // "("
  const items: Array<string | number | boolean> = [];
  for (;;) {
    while (p.at() === 0x20) p.i++;
    if (p.at() === 0x29) {
      p.i++;
      skipParameters(p);
      return items;
    }
    items.push(parseBareItem(p));
    skipParameters(p);
    if (p.at() !== 0x20 && p.at() !== 0x29) p.fail('inner list items are separated by spaces');
  }
}

/**
 * One report line as an RFC 8941 dictionary: its keys and values, a key without a value being `true`. A repeated key
 * keeps its last value, as RFC 8941 says. Throws SyntaxError naming the character where the line stops being valid.
 * Written here rather than taken from `@svta/cml-cmcd` (the players' own library, which the tests use as the
 * reference decoder): it decodes a typical report in a quarter of the time (bench/RESULTS.md "CMCD decoding").
 */
export function decodeReport(line: string): CmcdReport {
  const p = new Cursor(line);
  const out: CmcdReport = {};
  while (p.at() === 0x20 || p.at() === 0x09) p.i++;
  if (p.at() === -1) return out;
  for (;;) {
    const key = parseKey(p);
    let value: CmcdValue = true;
    if (p.at() === 0x3d) {
      p.i++;
      value = p.at() === 0x28 ? parseInnerList(p) : parseBareItem(p);
    }
    skipParameters(p);
    out[key] = value;
    while (p.at() === 0x20 || p.at() === 0x09) p.i++;
    if (p.at() === -1) return out;
    if (p.at() !== 0x2c) p.fail('expected "," between keys');
    p.i++;
    while (p.at() === 0x20 || p.at() === 0x09) p.i++;
    if (p.at() === -1) p.fail('a line may not end with ","');
  }
}

/** Reverse-DNS custom keys (CTA-5004-B allows them) for what CMCD itself does not carry. */
export const customKeys = {
  user_id: 'io.darshak-user-id',
  anonymous_id: 'io.darshak-anonymous-id',
  content_title: 'io.darshak-content-title',
  content_type: 'io.darshak-content-type',
  device_type: 'io.darshak-device-type',
  region: 'io.darshak-region',
} as const;

/** `sta` (CTA-5004-B player states) → the event a play-state report becomes; absent: none. */
const stateEvents: Readonly<Record<string, string>> = {
  s: 'play_start',
  p: 'first_frame',
  r: 'rebuffer_start',
  a: 'pause',
  k: 'seek_start',
  e: 'ended',
  f: 'error',
  q: 'session_end',
};

const first = (v: CmcdValue | undefined): CmcdValue | undefined => (Array.isArray(v) ? v[0] : v);
const str = (v: CmcdValue | undefined): string | undefined => {
  const x = first(v);
  return typeof x === 'string' && x !== '' ? x : undefined;
};
const num = (v: CmcdValue | undefined): number | undefined => {
  const x = first(v);
  return typeof x === 'number' && Number.isFinite(x) && x >= 0 ? x : undefined;
};

/** A report's de-duplication identity, (`sid`, `sn`), as the UUID `event_id` asks for (RFC 9562 version 8). */
function reportId(sid: string, sn: number): string {
  const h = createHash('sha256').update(`${sid}\n${sn}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x80;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.toString('hex', 0, 16);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

export type Mapped =
  { kind: 'event'; event: Record<string, unknown> } | { kind: 'ignored' } | { kind: 'invalid'; message: string };

/**
 * One report as the event it stands for (validated afterwards like any event sent to /v1/ingest/events), or
 * `ignored` for a report that feeds no metric (mute, ad, response-received, ...). CMCD reports states, not
 * transitions, and players do not all send `msd` with the first frame (hls.js never does): every report of playing
 * is a `first_frame`. Only a session's first one after its play_start ends startup; the others put the session in
 * `playing`, as `resume`, `seek_end` and `rebuffer_end` do.
 */
export function reportEvent(r: CmcdReport): Mapped {
  const e = str(r.e);
  if (e === undefined) return { kind: 'invalid', message: 'no event type: "e" is required in event mode' };
  const ts = num(r.ts);
  if (ts === undefined) return { kind: 'invalid', message: '"ts" (Unix milliseconds) is required in event mode' };
  const sid = str(r.sid);
  if (sid === undefined) return { kind: 'invalid', message: '"sid" (the session) is required' };
  const sta = str(r.sta);
  let type: string | undefined;
  let fatal = false;
  if (e === 'ps') {
    type = sta === undefined ? undefined : stateEvents[sta];
    fatal = sta === 'f';
  } else if (e === 't') {
    // A time-interval report is a heartbeat while the player plays or rebuffers; a paused or seeking player's
    // heartbeat would put its session back in `playing`.
    type = sta === undefined || sta === 'p' || sta === 'r' ? 'heartbeat' : undefined;
  } else if (e === 'e') {
    type = 'error';
    fatal = sta === 'f';
  } else if (e === 'bc') {
    type = num(r.br) === undefined ? undefined : 'bitrate_change';
  }
  if (type === undefined) return { kind: 'ignored' };

  const event: Record<string, unknown> = { event_type: type, ts: new Date(ts).toISOString(), session_id: sid };
  const sn = num(r.sn);
  if (sn !== undefined) event.event_id = reportId(sid, sn);
  const cid = str(r.cid);
  if (cid !== undefined) event.content_id = cid;
  const userId = str(r[customKeys.user_id]);
  const anonymousId = str(r[customKeys.anonymous_id]);
  if (userId !== undefined) event.user_id = userId;
  // Without either, the session is its own viewer: play_start needs one, and CMCD names none.
  event.anonymous_id = anonymousId ?? sid;
  const title = str(r[customKeys.content_title]);
  if (title !== undefined) event.content_title = title;
  const contentType = str(r[customKeys.content_type]) ?? (str(r.st) === 'l' ? 'live' : undefined);
  if (contentType !== undefined) event.content_type = contentType;
  const pt = num(r.pt);
  if (pt !== undefined) event.position_sec = Math.floor(pt / 1000);
  const br = num(r.br);
  if (br !== undefined) event.bitrate_kbps = Math.round(br);

  const context: Record<string, string> = {};
  const cdn = str(r.cdn);
  if (cdn !== undefined) context.cdn = cdn;
  const device = str(r[customKeys.device_type]);
  if (device !== undefined) context.device_type = device;
  const region = str(r[customKeys.region]);
  if (region !== undefined) context.region = region;
  if (Object.keys(context).length > 0) event.context = context;

  const properties: Record<string, unknown> = {};
  if (type === 'error') {
    properties.fatal = fatal;
    const ec = Array.isArray(r.ec) ? r.ec.join(',') : r.ec;
    if (ec !== undefined && ec !== true) properties.code = String(ec).slice(0, 128);
  }
  const msd = num(r.msd);
  if (msd !== undefined) properties.startup_ms = msd;
  const ltc = num(r.ltc);
  if (ltc !== undefined) properties.live_latency_ms = ltc;
  const bl = num(r.bl);
  if (bl !== undefined) properties.buffer_ms = bl;
  const mtp = num(r.mtp);
  if (mtp !== undefined) properties.throughput_kbps = mtp;
  const dfa = num(r.dfa);
  if (dfa !== undefined) properties.dropped_frames = dfa;
  const st = str(r.st);
  if (st !== undefined) properties.stream_type = st === 'l' ? 'live' : st === 'v' ? 'vod' : st;
  const sf = str(r.sf);
  if (sf !== undefined) properties.streaming_format = sf;
  if (Object.keys(properties).length > 0) event.properties = properties;
  return { kind: 'event', event };
}
