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

/**
 * The network a client address stands for: an IPv4 address itself, an IPv6 address's /64 (one subscriber's
 * allocation, within which addresses are free to change). Anything else as it is.
 */
export function clientNetwork(address: string): string {
  const words = ipv6Words(address);
  if (!words) return address;
  const mapped = words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff;
  if (mapped) return `${words[6]! >> 8}.${words[6]! & 255}.${words[7]! >> 8}.${words[7]! & 255}`;
  return `${words
    .slice(0, 4)
    .map((w) => w.toString(16))
    .join(':')}::/64`;
}
