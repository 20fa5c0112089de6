// Every textual form of an internal address a webhook URL may carry (issue 60), for the SSRF guard's tests at
// creation (test/e2e/api-webhooks.test.ts) and at delivery (test/webhooks/unit.test.ts). Each is a URL host as a user
// would type it; the WHATWG URL parser rewrites some (IPv4 in decimal, hex or octal) before the guard sees them.

/** [what it is, URL host]. */
export const internalHosts: ReadonlyArray<[string, string]> = [
  ['loopback', '127.0.0.1'],
  ['loopback, decimal', '2130706433'],
  ['loopback, hex', '0x7f000001'],
  ['loopback, octal', '0177.0.0.1'],
  ['loopback, short', '127.1'],
  ['metadata', '169.254.169.254'],
  ['metadata, decimal', '2852039166'],
  ['private', '10.0.0.1'],
  ['IPv6 loopback', '[::1]'],
  ['IPv6 unspecified', '[::]'],
  ['IPv4-compatible, dotted', '[::127.0.0.1]'],
  ['IPv4-compatible, hex', '[::7f00:1]'],
  ['IPv4-compatible metadata', '[::a9fe:a9fe]'],
  ['IPv4-compatible, full', '[0:0:0:0:0:0:a00:1]'],
  ['mapped', '[::ffff:127.0.0.1]'],
  ['mapped, hex', '[::ffff:7f00:1]'],
  ['mapped, full', '[0:0:0:0:0:ffff:a9fe:a9fe]'],
  ['translated', '[::ffff:0:a00:1]'],
  ['NAT64', '[64:ff9b::7f00:1]'],
  ['NAT64, dotted', '[64:ff9b::169.254.169.254]'],
  ['NAT64 local use', '[64:ff9b:1::a00:1]'],
  ['6to4', '[2002:7f00:1::1]'],
  ['6to4 metadata', '[2002:a9fe:a9fe::]'],
  ['Teredo', '[2001:0:4136:e378:8000:63bf:3fff:fdd2]'],
  ['Teredo, bare', '[2001::1]'],
  ['site-local', '[fec0::1]'],
  ['site-local, top', '[feff::1]'],
  ['unique local', '[fd12:3456::1]'],
  ['link-local', '[fe80::1]'],
  ['multicast', '[ff02::1]'],
  ['documentation', '[2001:db8::1]'],
];

/** The addresses a name may resolve to: each internal form without its brackets (the URL parser's spelling). */
export const internalAddresses = (): string[] =>
  internalHosts.map(([, host]) => new URL(`http://${host}/`).hostname.replace(/^\[(.*)\]$/, '$1'));
