import net from 'node:net';

/** An address family of a network. */
export type IpFamily = 'ipv4' | 'ipv6';

/** A network as bytes: 4 for IPv4, 16 for IPv6, with its prefix length. */
export interface Network {
  family: IpFamily;
  bytes: Uint8Array;
  prefix: number;
}

function ipv4Bytes(s: string): Uint8Array | undefined {
  // net.isIPv4 refuses leading zeros ("010" reads as octal to some tools), so nothing is guessed.
  if (!net.isIPv4(s)) return undefined;
  return Uint8Array.from(s.split('.').map(Number));
}

function ipv6Bytes(s: string): Uint8Array | undefined {
  // net.isIPv6 checks the grammar (it accepts a zone id, which a network cannot have).
  if (!net.isIPv6(s) || s.includes('%')) return undefined;
  let text = s.toLowerCase();
  // An embedded IPv4 tail (`::ffff:10.0.0.1`) is two groups.
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = ipv4Bytes(last);
    if (!v4) return undefined;
    const hi = ((v4[0]! << 8) | v4[1]!).toString(16);
    const lo = ((v4[2]! << 8) | v4[3]!).toString(16);
    text = `${text.slice(0, lastColon + 1)}${hi}:${lo}`;
  }
  const [head = '', rest] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = rest ? rest.split(':') : [];
  const zeros = rest !== undefined ? 8 - h.length - t.length : 0;
  const groups = [...h, ...Array<string>(Math.max(zeros, 0)).fill('0'), ...t].map((g) => parseInt(g, 16));
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff))
    return undefined;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  return out;
}

/** Whether 16 bytes are an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`). */
function isV4Mapped(b: Uint8Array): boolean {
  return b.length === 16 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
}

/** An address as bytes; an IPv4-mapped IPv6 address becomes its IPv4 address. */
export function parseIp(raw: string): { family: IpFamily; bytes: Uint8Array } | undefined {
  const v4 = ipv4Bytes(raw);
  if (v4) return { family: 'ipv4', bytes: v4 };
  const v6 = ipv6Bytes(raw);
  if (!v6) return undefined;
  return isV4Mapped(v6) ? { family: 'ipv4', bytes: v6.slice(12) } : { family: 'ipv6', bytes: v6 };
}

function mask(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - 8 * i));
    out[i]! &= (0xff << (8 - keep)) & 0xff;
  }
  return out;
}

/**
 * Parses `address` or `address/prefix` (IPv4 or IPv6) into its network: host bits cleared, a
 * bare address a single host, an IPv4-mapped IPv6 network of prefix ≥ 96 its IPv4 network.
 */
export function parseNetwork(raw: string): Network | undefined {
  const [address = '', prefixText, extra] = raw.split('/');
  if (extra !== undefined) return undefined;
  const v4 = ipv4Bytes(address);
  const v6 = v4 ? undefined : ipv6Bytes(address);
  const bytes = v4 ?? v6;
  if (!bytes) return undefined;
  const max = bytes.length * 8;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  if (v6 && isV4Mapped(v6) && prefix >= 96) {
    return { family: 'ipv4', bytes: mask(v6.slice(12), prefix - 96), prefix: prefix - 96 };
  }
  return { family: v4 ? 'ipv4' : 'ipv6', bytes: mask(bytes, prefix), prefix };
}

/** RFC 5952 text of 16 bytes: lowercase, no leading zeros, the longest run of ≥ 2 zero groups as `::`. */
function formatIpv6(b: Uint8Array): string {
  const groups = Array.from({ length: 8 }, (_, i) => (b[2 * i]! << 8) | b[2 * i + 1]!);
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** The canonical `address/prefix` text of a network. */
export function formatNetwork(n: Network): string {
  const address = n.family === 'ipv4' ? Array.from(n.bytes).join('.') : formatIpv6(n.bytes);
  return `${address}/${n.prefix}`;
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
  const masked = mask(a.bytes, n.prefix);
  return masked.every((x, i) => x === n.bytes[i]);
}
