import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { fail, ok, type Result } from '../result.js';
import { ipv6Words, mappedIpv4, quadOf } from './address.js';

// IPv4 addresses a webhook may never reach unless exempted: this host, private networks, link-local (cloud metadata
// at 169.254.169.254), CGNAT, multicast and reserved ranges.
const deniedIpv4: Array<[string, number]> = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];

// IPv6: only global unicast (2000::/3) is reachable, less the special-purpose blocks within it (IANA's registry):
// IETF protocol assignments with Teredo (2001::/23), documentation (2001:db8::/32, 3fff::/20). Forms that carry an
// IPv4 address (mapped, translated, compatible, NAT64, 6to4) are judged by that address.
const deniedIpv6: Array<[string, number]> = [
  ['2001::', 23],
  ['2001:db8::', 32],
  ['3fff::', 20],
];

/** The IPv4 address an IPv6 address carries (mapped, translated, compatible, NAT64 well-known prefix, 6to4), or null. */
export function embeddedIpv4(address: string): string | null {
  const w = ipv6Words(address);
  if (!w) return null;
  const zero = (from: number, to: number): boolean => w.slice(from, to).every((x) => x === 0);
  const mapped = mappedIpv4(w); // ::ffff:a.b.c.d
  if (mapped) return mapped;
  if (zero(0, 4) && w[4] === 0xffff && w[5] === 0) return quadOf(w[6]!, w[7]!); // ::ffff:0:a.b.c.d
  if (zero(0, 6) && (w[6] !== 0 || w[7]! > 1)) return quadOf(w[6]!, w[7]!); // ::a.b.c.d, not :: or ::1
  if (w[0] === 0x64 && w[1] === 0xff9b && zero(2, 6)) return quadOf(w[6]!, w[7]!); // 64:ff9b::a.b.c.d
  if (w[0] === 0x2002) return quadOf(w[1]!, w[2]!); // 2002:AABB:CCDD::/48
  return null;
}

/** `::ffff:10.0.0.1` (or `::ffff:a00:1`) is 10.0.0.1: the IPv4 address an IPv6 one carries, else the address. */
export function unmapIpv4(address: string): string {
  return embeddedIpv4(address) ?? address;
}

export type Resolved = Result<{ address: string; family: 4 | 6 }, string>;

/** Every address a host name resolves to (`dns.lookup` with `all`, in the resolver's order). */
export type LookupAll = (host: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: LookupAll = (host) => lookup(host, { all: true, verbatim: true });

/**
 * The SSRF guard: resolves a host once and answers the address to connect to, which the caller must use as is (no
 * second lookup, so DNS cannot answer differently between check and connect). `allow` (WEBHOOK_ALLOW_HOSTS) holds
 * CIDRs, addresses or host names that are exempt.
 */
export class AddressGuard {
  private readonly deny = new BlockList();
  private readonly allowNets = new BlockList();
  private readonly allowHosts = new Set<string>();

  private readonly globalUnicast = new BlockList();

  /** `resolver`: the system's by default; tests give names that resolve to each internal form. */
  constructor(
    allow: readonly string[],
    private readonly resolver: LookupAll = systemLookup,
  ) {
    for (const [net, prefix] of deniedIpv4) this.deny.addSubnet(net, prefix, 'ipv4');
    for (const [net, prefix] of deniedIpv6) this.deny.addSubnet(net, prefix, 'ipv6');
    this.globalUnicast.addSubnet('2000::', 3, 'ipv6');
    for (const raw of allow) {
      const entry = raw.trim().toLowerCase();
      const [net, bits] = entry.split('/');
      const family = isIP(net ?? '');
      if (family !== 0 && bits !== undefined)
        this.allowNets.addSubnet(net as string, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
      else if (family !== 0) this.allowNets.addAddress(entry, family === 4 ? 'ipv4' : 'ipv6');
      else if (entry) this.allowHosts.add(entry);
    }
  }

  /**
   * Why an address may not be reached, or null. An exemption of an IPv4 network covers that network's IPv4-mapped
   * spelling (a socket to `::ffff:a.b.c.d` reaches a.b.c.d), not the other forms that carry it: a socket to
   * IPv4-compatible `::7f00:1`, NAT64 or 6to4 goes to another host (a translator, a relay, wherever the IPv6 route
   * leads), so exempting 127.0.0.0/8 for a local receiver must not open those.
   */
  refusal(address: string): string | null {
    const a = unmapIpv4(address);
    const family = isIP(a);
    if (family === 0) return `${address} is not an IP address`;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    const reachesIpv4 = a === address || mappedIpv4(ipv6Words(address) ?? []) !== null;
    if ((reachesIpv4 && this.allowNets.check(a, type)) || (a !== address && this.allowNets.check(address, 'ipv6')))
      return null;
    const refused = this.deny.check(a, type) || (type === 'ipv6' && !this.globalUnicast.check(a, 'ipv6'));
    return refused ? `${address} is a loopback, private, link-local, shared, reserved or non-global address` : null;
  }

  /**
   * Why a webhook URL's host may not be reached, when that is known now: a literal address, or a name that resolves
   * to refused addresses only. A name that does not resolve (yet) is judged at delivery.
   */
  async refusalOf(hostname: string): Promise<string | null> {
    const r = await this.resolve(hostname);
    return r.ok || r.error.startsWith('DNS lookup') ? null : r.error;
  }

  async resolve(hostname: string): Promise<Resolved> {
    const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
    const exempt = this.allowHosts.has(host);
    let candidates: Array<{ address: string; family: number }>;
    if (isIP(host) !== 0) candidates = [{ address: host, family: isIP(host) }];
    else {
      try {
        candidates = await this.resolver(host);
      } catch (err) {
        return fail(`DNS lookup of ${host} failed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    }
    const refusals: string[] = [];
    for (const c of candidates) {
      const why = exempt ? null : this.refusal(c.address);
      if (why === null) return ok({ address: c.address, family: c.family === 6 ? 6 : 4 });
      refusals.push(why);
    }
    return fail(`refused by the SSRF guard: ${host} resolves to ${refusals.join('; ') || 'nothing'}`);
  }
}
