import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

// Addresses a webhook may never reach unless exempted: this host, private networks, link-local (cloud metadata at
// 169.254.169.254), CGNAT, multicast, reserved and unique-local ranges.
const denied: Array<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
];

/** `::ffff:10.0.0.1` (or `::ffff:a00:1`) is 10.0.0.1: judge the IPv4 address it carries. */
export function unmapIpv4(address: string): string {
  const m = /^::ffff:(.+)$/i.exec(address);
  if (!m) return address;
  const rest = m[1] as string;
  if (isIP(rest) === 4) return rest;
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(rest);
  if (!hex) return address;
  const hi = parseInt(hex[1] as string, 16);
  const lo = parseInt(hex[2] as string, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

export type Resolved = { ok: true; address: string; family: 4 | 6 } | { ok: false; error: string };

/**
 * The SSRF guard: resolves a host once and answers the address to connect to, which the caller must use as is (no
 * second lookup, so DNS cannot answer differently between check and connect). `allow` (WEBHOOK_ALLOW_HOSTS) holds
 * CIDRs, addresses or host names that are exempt.
 */
export class AddressGuard {
  private readonly deny = new BlockList();
  private readonly allowNets = new BlockList();
  private readonly allowHosts = new Set<string>();

  constructor(allow: readonly string[]) {
    for (const [net, prefix, type] of denied) this.deny.addSubnet(net, prefix, type);
    for (const raw of allow) {
      const entry = raw.trim().toLowerCase();
      const [net, bits] = entry.split('/');
      const family = isIP(net ?? '');
      if (family !== 0 && bits !== undefined) this.allowNets.addSubnet(net as string, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
      else if (family !== 0) this.allowNets.addAddress(entry, family === 4 ? 'ipv4' : 'ipv6');
      else if (entry) this.allowHosts.add(entry);
    }
  }

  /** Why an address may not be reached, or null. */
  refusal(address: string): string | null {
    const a = unmapIpv4(address);
    const family = isIP(a);
    if (family === 0) return `${address} is not an IP address`;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (this.allowNets.check(a, type)) return null;
    return this.deny.check(a, type) ? `${address} is a loopback, private, link-local, shared or reserved address` : null;
  }

  async resolve(hostname: string): Promise<Resolved> {
    const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
    const exempt = this.allowHosts.has(host);
    let candidates: Array<{ address: string; family: number }>;
    if (isIP(host) !== 0) candidates = [{ address: host, family: isIP(host) }];
    else {
      try {
        candidates = await lookup(host, { all: true, verbatim: true });
      } catch (err) {
        return { ok: false, error: `DNS lookup of ${host} failed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
      }
    }
    const refusals: string[] = [];
    for (const c of candidates) {
      const why = exempt ? null : this.refusal(c.address);
      if (why === null) return { ok: true, address: c.address, family: c.family === 6 ? 6 : 4 };
      refusals.push(why);
    }
    return { ok: false, error: `refused by the SSRF guard: ${host} resolves to ${refusals.join('; ') || 'nothing'}` };
  }
}
