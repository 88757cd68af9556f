import dns from 'node:dns';
import net from 'node:net';
import {
  InvalidArgumentError,
  formatNetwork,
  networkContains,
  parseIp,
  parseNetwork,
  type Network,
} from '@custos/service-kit';

/** What a webhook URL may point at. */
export interface DestinationPolicy {
  /** Accept http: URLs (otherwise only https:). Off by default in config. */
  allowHttp: boolean;
  /** Networks the operator explicitly allows even though they are private (empty by default). */
  allowedNetworks: Network[];
  /** Resolves a host name to every address it has (both families); throws on DNS failure. */
  resolve: (host: string) => Promise<string[]>;
}

/**
 * A webhook URL that may not be called. The reason names the URL's host or address, never the
 * URL itself: its path, query or credentials may carry a secret.
 */
export class DestinationRefusedError extends InvalidArgumentError {
  constructor(readonly reason: string) {
    super('url', reason);
  }
}

/** The longest webhook URL accepted. */
export const MAX_URL_LENGTH = 2048;

// Host names that name the local machine, a private zone, or a cloud metadata service. Names that
// are single labels (`metadata`, `instance-data`) are caught by the single-label rule as well.
const METADATA_NAMES = new Set(['metadata', 'metadata.google.internal', 'instance-data']);
const PRIVATE_SUFFIXES = ['.local', '.internal', '.localdomain', '.home.arpa'];

interface Labelled {
  network: Network;
  label: string;
}

const entry = (cidr: string, label: string): Labelled => ({ network: parseNetwork(cidr)!, label });

// Cloud metadata services: refused whatever WEBHOOK_ALLOWED_CIDRS says.
const METADATA_ADDRESSES = [
  entry('169.254.169.254/32', 'a cloud metadata address'),
  entry('100.100.100.200/32', 'a cloud metadata address'),
  entry('192.0.0.192/32', 'a cloud metadata address'),
  entry('fd00:ec2::254/128', 'a cloud metadata address'),
];

// First match wins, so single hosts come before the ranges that hold them.
const IPV4_BLOCKED = [
  entry('0.0.0.0/32', 'an unspecified address'),
  entry('255.255.255.255/32', 'a broadcast address'),
  entry('0.0.0.0/8', 'a "this network" address'),
  entry('10.0.0.0/8', 'a private address'),
  entry('100.64.0.0/10', 'a shared (carrier-grade NAT) address'),
  entry('127.0.0.0/8', 'a loopback address'),
  entry('169.254.0.0/16', 'a link-local address'),
  entry('172.16.0.0/12', 'a private address'),
  entry('192.0.0.0/24', 'an IETF protocol assignment address'),
  entry('192.0.2.0/24', 'a documentation address'),
  entry('192.88.99.0/24', 'a 6to4 relay anycast address'),
  entry('192.168.0.0/16', 'a private address'),
  entry('198.18.0.0/15', 'a benchmarking address'),
  entry('198.51.100.0/24', 'a documentation address'),
  entry('203.0.113.0/24', 'a documentation address'),
  entry('224.0.0.0/4', 'a multicast address'),
  entry('240.0.0.0/4', 'a reserved address'),
];

// Checked before the embedded forms: `::` and `::1` lie inside `::/96` (IPv4-compatible).
const IPV6_EXACT = [entry('::/128', 'an unspecified address'), entry('::1/128', 'a loopback address')];

// IPv6 forms that carry an IPv4 address, judged by that address. IPv4-mapped (`::ffff:0:0/96`)
// needs no entry: parseIp already turns it into its IPv4 address.
const IPV6_EMBEDDING = [
  { network: parseNetwork('::/96')!, kind: 'IPv4-compatible', offset: 12 },
  { network: parseNetwork('::ffff:0:0:0/96')!, kind: 'IPv4-translated', offset: 12 },
  { network: parseNetwork('64:ff9b::/96')!, kind: 'NAT64', offset: 12 },
  { network: parseNetwork('2002::/16')!, kind: '6to4', offset: 2 },
];

const IPV6_BLOCKED = [
  entry('fc00::/7', 'a unique-local address'),
  entry('fe80::/10', 'a link-local address'),
  entry('fec0::/10', 'a site-local address'),
  entry('ff00::/8', 'a multicast address'),
  entry('2001:db8::/32', 'a documentation address'),
  entry('3fff::/20', 'a documentation address'),
  entry('100::/64', 'a discard-only address'),
  // Teredo hides its IPv4 addresses (the client's is obfuscated), so it cannot be judged by them.
  entry('2001::/32', 'a Teredo address'),
  entry('2001:2::/48', 'a benchmarking address'),
  entry('64:ff9b:1::/48', 'a local-use NAT64 address'),
];

// Only 2000::/3 is allocated as global unicast; anything outside it is not a public host.
const IPV6_GLOBAL_UNICAST = parseNetwork('2000::/3')!;

function ipText(family: 'ipv4' | 'ipv6', bytes: Uint8Array): string {
  return formatNetwork({ family, bytes, prefix: bytes.length * 8 }).replace(/\/\d+$/, '');
}

function firstLabel(list: Labelled[], ip: string): string | undefined {
  return list.find((e) => networkContains(e.network, ip))?.label;
}

/** The IPv4 address an IPv6 address carries (compatible, translated, NAT64, 6to4), if any. */
function embeddedIpv4(ip: string, bytes: Uint8Array): { v4: string; kind: string } | undefined {
  if (firstLabel(IPV6_EXACT, ip)) return undefined;
  const e = IPV6_EMBEDDING.find((x) => networkContains(x.network, ip));
  return e && { v4: ipText('ipv4', bytes.slice(e.offset, e.offset + 4)), kind: e.kind };
}

/** What kind of blocked address `ip` is and how to show it; undefined when it may be called. */
function classify(ip: string, allowedNetworks: Network[]): { label: string; shown: string } | undefined {
  const parsed = parseIp(ip);
  if (!parsed) return { label: 'an invalid address', shown: ip.slice(0, 64) };
  const shown = ipText(parsed.family, parsed.bytes);
  // Metadata services stay refused even inside an allowed network (169.254/16, 100.64/10, fd00::/8).
  const metadata = firstLabel(METADATA_ADDRESSES, ip);
  if (metadata) return { label: metadata, shown };
  const carried = parsed.family === 'ipv6' ? embeddedIpv4(ip, parsed.bytes) : undefined;
  if (carried && firstLabel(METADATA_ADDRESSES, carried.v4)) {
    return { label: 'a cloud metadata address', shown: `${carried.v4} in ${carried.kind} ${shown}` };
  }
  if (allowedNetworks.some((n) => networkContains(n, ip))) return undefined;
  if (parsed.family === 'ipv4') {
    const label = firstLabel(IPV4_BLOCKED, ip);
    return label ? { label, shown } : undefined;
  }
  const exact = firstLabel(IPV6_EXACT, ip);
  if (exact) return { label: exact, shown };
  const embedding = IPV6_EMBEDDING.find((e) => networkContains(e.network, ip));
  if (embedding) {
    const v4 = ipText('ipv4', parsed.bytes.slice(embedding.offset, embedding.offset + 4));
    const inner = classify(v4, allowedNetworks);
    return inner && { label: inner.label, shown: `${v4} in ${embedding.kind} ${shown}` };
  }
  const label =
    firstLabel(IPV6_BLOCKED, ip) ??
    (networkContains(IPV6_GLOBAL_UNICAST, ip) ? undefined : 'a reserved address');
  return label ? { label, shown } : undefined;
}

/** Why an address is blocked, or undefined when it is public (or allowed by policy.allowedNetworks). */
export function blockedReason(ip: string, allowedNetworks: Network[]): string | undefined {
  const blocked = classify(ip, allowedNetworks);
  return blocked && `${blocked.label} (${blocked.shown})`;
}

function hostNameReason(host: string): string | undefined {
  if (host === 'localhost' || host.endsWith('.localhost')) return `url targets localhost (${host})`;
  if (METADATA_NAMES.has(host)) return `url targets a cloud metadata host (${host})`;
  if (PRIVATE_SUFFIXES.some((s) => host.endsWith(s))) return `url targets an internal host name (${host})`;
  if (host.split('.').includes('')) return 'url host name is malformed';
  if (!host.includes('.')) return `url host must be a fully qualified name (${host})`;
  return undefined;
}

/** The URL's host without brackets or trailing dots: an IP address or a lower-case host name. */
function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
}

/**
 * Syntax-only checks (no DNS): scheme, no userinfo (refuse credentials in the URL outright), host
 * present, not an IP literal in a blocked range (after WHATWG URL normalisation), no forbidden host
 * names, length <= 2048. A fragment is never sent over HTTP, so it is stripped from the returned URL.
 */
export function checkUrl(raw: string, policy: Pick<DestinationPolicy, 'allowHttp' | 'allowedNetworks'>): URL {
  if (raw.length > MAX_URL_LENGTH) {
    throw new DestinationRefusedError(`url is longer than ${MAX_URL_LENGTH} characters`);
  }
  // The URL parser would silently drop these; refusing keeps the stored URL what the user typed.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f]/.test(raw)) {
    throw new DestinationRefusedError('url must not contain spaces or control characters');
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new DestinationRefusedError('url is not a valid absolute URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    throw new DestinationRefusedError(policy.allowHttp ? 'url must use https or http' : 'url must use https');
  }
  if (url.username !== '' || url.password !== '') {
    throw new DestinationRefusedError('url must not contain credentials');
  }
  // Normalising can lengthen a URL (percent-encoding); what is stored and sent is the href.
  if (url.href.length > MAX_URL_LENGTH) {
    throw new DestinationRefusedError(`url is longer than ${MAX_URL_LENGTH} characters once encoded`);
  }
  const host = bareHost(url);
  if (host === '') throw new DestinationRefusedError('url has no host');
  if (net.isIP(host) !== 0) {
    const reason = blockedReason(host, policy.allowedNetworks);
    if (reason) throw new DestinationRefusedError(`url targets ${reason}`);
  } else {
    const reason = hostNameReason(host);
    if (reason) throw new DestinationRefusedError(reason);
  }
  url.hash = '';
  return url;
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * checkUrl + resolve the host once (IP literals are not resolved); refuses if resolution fails,
 * returns nothing, or ANY returned address is blocked (unless inside allowedNetworks). Returns the
 * address to connect to (first allowed one).
 */
export async function resolveDestination(
  raw: string,
  policy: DestinationPolicy,
): Promise<{ url: URL; address: string; family: 4 | 6 }> {
  const url = checkUrl(raw, policy);
  const host = bareHost(url);
  if (net.isIP(host) !== 0) return { url, address: host, family: net.isIP(host) as 4 | 6 };
  let addresses: string[];
  try {
    addresses = await policy.resolve(host);
  } catch (err) {
    const code = errorCode(err);
    throw new DestinationRefusedError(`dns lookup for ${host} failed${code ? ` (${code})` : ''}`);
  }
  if (addresses.length === 0) throw new DestinationRefusedError(`host ${host} has no addresses`);
  // One blocked address refuses the whole name: a resolver may rotate them between lookups.
  for (const address of addresses) {
    const reason = blockedReason(address, policy.allowedNetworks);
    if (reason) throw new DestinationRefusedError(`host ${host} resolves to ${reason}`);
  }
  const address = addresses[0]!;
  return { url, address, family: net.isIP(address) as 4 | 6 };
}

// Bounds a lookup against explicit servers to about 2 × 2 s instead of c-ares' 4 × 5 s.
const RESOLVER_OPTIONS = { timeout: 2000, tries: 2 };

/**
 * A resolver: with `servers` (e.g. ['127.0.0.1:5353']) uses dns.promises.Resolver with setServers,
 * querying A and AAAA (NODATA for one family is fine, both failing = error); without servers uses
 * dns.promises.lookup(host, {all: true, verbatim: true}).
 */
export function createResolver(servers: string[]): (host: string) => Promise<string[]> {
  if (servers.length === 0) {
    return async (host) =>
      (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  }
  const resolver = new dns.promises.Resolver(RESOLVER_OPTIONS);
  resolver.setServers(servers);
  return async (host) => {
    const results = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const found = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (failures.length === results.length) {
      // NXDOMAIN says more than the other family's NODATA.
      throw failures.find((e) => errorCode(e) !== dns.NODATA) ?? failures[0];
    }
    return found;
  };
}
