import ipaddr from 'ipaddr.js';

/** An address family of a network. */
export type IpFamily = 'ipv4' | 'ipv6';

/** A network as bytes: 4 for IPv4, 16 for IPv6, with its prefix length. */
export interface Network {
  family: IpFamily;
  bytes: Uint8Array;
  prefix: number;
}

// ipaddr.js also reads the legacy IPv4 spellings (`10.1`, `0x7f.0.0.1`, `010.0.0.1`) that other
// tools read differently; only four-part decimal without leading zeros is accepted, so nothing is
// guessed.
function ipv4(s: string): ipaddr.IPv4 | undefined {
  return ipaddr.IPv4.isValidFourPartDecimal(s) ? ipaddr.IPv4.parse(s) : undefined;
}

function ipv6(s: string): ipaddr.IPv6 | undefined {
  // A zone id (`fe80::1%eth0`) names an interface, not an address a network can hold.
  if (s.includes('%')) return undefined;
  const lastColon = s.lastIndexOf(':');
  if (lastColon < 0) return undefined;
  let text = s;
  const tail = s.slice(lastColon + 1);
  if (tail.includes('.')) {
    // ipaddr.js reads `::a.b.c.d` (IPv4-compatible, RFC 4291) as IPv4-mapped and accepts legacy
    // spellings in the tail: the tail becomes its two hex groups first.
    const v4 = ipv4(tail);
    if (!v4) return undefined;
    const [a, b, c, d] = v4.octets as [number, number, number, number];
    text = `${s.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  return ipaddr.IPv6.isValid(text) ? ipaddr.IPv6.parse(text) : undefined;
}

/** An address as bytes; an IPv4-mapped IPv6 address becomes its IPv4 address. */
export function parseIp(raw: string): { family: IpFamily; bytes: Uint8Array } | undefined {
  const v4 = ipv4(raw);
  if (v4) return { family: 'ipv4', bytes: Uint8Array.from(v4.toByteArray()) };
  const v6 = ipv6(raw);
  if (!v6) return undefined;
  return v6.isIPv4MappedAddress()
    ? { family: 'ipv4', bytes: Uint8Array.from(v6.toIPv4Address().toByteArray()) }
    : { family: 'ipv6', bytes: Uint8Array.from(v6.toByteArray()) };
}

function network(family: IpFamily, bytes: Uint8Array, prefix: number): Network {
  const maskBytes = (
    family === 'ipv4'
      ? ipaddr.IPv4.subnetMaskFromPrefixLength(prefix)
      : ipaddr.IPv6.subnetMaskFromPrefixLength(prefix)
  ).toByteArray();
  return { family, bytes: bytes.map((b, i) => b & maskBytes[i]!), prefix };
}

/**
 * Parses `address` or `address/prefix` (IPv4 or IPv6) into its network: host bits cleared, a
 * bare address a single host, an IPv4-mapped IPv6 network of prefix ≥ 96 its IPv4 network.
 */
export function parseNetwork(raw: string): Network | undefined {
  const [address = '', prefixText, extra] = raw.split('/');
  if (extra !== undefined) return undefined;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const v4 = ipv4(address);
  const v6 = v4 ? undefined : ipv6(address);
  const addr = v4 ?? v6;
  if (!addr) return undefined;
  const bytes = Uint8Array.from(addr.toByteArray());
  const max = bytes.length * 8;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  if (v6?.isIPv4MappedAddress() && prefix >= 96) {
    return network('ipv4', bytes.slice(12), prefix - 96);
  }
  return network(v4 ? 'ipv4' : 'ipv6', bytes, prefix);
}

/** The canonical `address/prefix` text of a network (RFC 5952 for IPv6). */
export function formatNetwork(n: Network): string {
  const addr = ipaddr.fromByteArray(Array.from(n.bytes));
  const text = addr.kind() === 'ipv6' ? (addr as ipaddr.IPv6).toRFC5952String() : addr.toString();
  return `${text}/${n.prefix}`;
}

/** The canonical form of a CIDR or address, or undefined when it is neither. */
export function normalizeCidr(raw: string): string | undefined {
  const n = parseNetwork(raw);
  return n ? formatNetwork(n) : undefined;
}

/** Whether the address lies in the network (families must agree after IPv4-mapped unwrapping). */
export function networkContains(n: Network, ip: string): boolean {
  const a = parseIp(ip);
  if (!a || a.family !== n.family) return false;
  return ipaddr.fromByteArray(Array.from(a.bytes)).match(ipaddr.fromByteArray(Array.from(n.bytes)), n.prefix);
}
