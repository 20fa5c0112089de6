import { isIP } from 'node:net';
import type { HttpRequest } from './types.js';

/** The client's address: the first hop of X-Forwarded-For behind a trusted proxy (TRUST_PROXY), else the peer's. */
export function clientAddress(req: HttpRequest, trustProxy: boolean): string {
  if (trustProxy) {
    const fwd = req.header('x-forwarded-for');
    if (fwd) return (fwd.split(',')[0] as string).trim();
  }
  return req.remoteAddress;
}

/**
 * An IPv4 peer as IPv4: the engines give IPv6 text for them (uWS "0000:...:ffff:7f00:0001", node:http on a dual-stack
 * socket "::ffff:127.0.0.1"). Regular expressions, not `ipv6Words`: this runs for every request.
 */
export function normaliseAddress(addr: string): string {
  const lower = addr.toLowerCase();
  const dotted = /^(?:0{1,4}:){5}ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower) ?? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1] as string;
  const hex =
    /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower) ??
    /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1] as string, 16);
    const lo = parseInt(hex[2] as string, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return addr;
}

/** The eight 16-bit words of an IPv6 address (a trailing dotted quad included), or null. */
export function ipv6Words(address: string): number[] | null {
  if (isIP(address) !== 6) return null;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string | undefined): number[] => (part ? part.split(':').map((w) => parseInt(w, 16)) : []);
  const h = parse(head);
  const t = parse(tail);
  return tail === undefined ? h : [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
}

/** Two 16-bit words as the dotted IPv4 address they hold. */
export const quadOf = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/** The IPv4 address an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, in any spelling) stands for, or null. */
export function mappedIpv4(words: readonly number[]): string | null {
  return words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff ? quadOf(words[6]!, words[7]!) : null;
}

/**
 * The network a client address stands for: an IPv4 address itself, an IPv6 address's /64 (one subscriber's
 * allocation, within which addresses are free to change). Anything else as it is.
 */
export function clientNetwork(address: string): string {
  const words = ipv6Words(address);
  if (!words) return address;
  const mapped = mappedIpv4(words);
  if (mapped) return mapped;
  return `${words
    .slice(0, 4)
    .map((w) => w.toString(16))
    .join(':')}::/64`;
}
