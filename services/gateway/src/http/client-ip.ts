import net from 'node:net';
import type { Request } from 'express';
import { ConfigError } from '@custos/service-kit';

/** The rate-limit bucket of an address: itself for IPv4, its /64 for IPv6 (one host's usual share). */
export function rateLimitBucket(ip: string): string {
  if (!net.isIPv6(ip)) return ip;
  const sock = new net.SocketAddress({ address: ip, family: 'ipv6' });
  const full = expandIpv6(sock.address);
  return `${full.slice(0, 4).join(':')}::/64`;
}

function expandIpv6(address: string): string[] {
  const [head = '', tail = ''] = address.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const zeros = address.includes('::') ? Array(8 - h.length - t.length).fill('0') : [];
  return [...h, ...zeros, ...t].map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''));
}

/** Strips the IPv4-mapped IPv6 prefix so one client has one spelling. */
export function normalizeIp(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return mapped ? mapped[1]! : ip;
}

/** Parses TRUSTED_PROXIES (CIDRs or single addresses) into a BlockList; bad entries are a config error. */
export function parseTrustedProxies(entries: string[]): net.BlockList {
  const list = new net.BlockList();
  for (const entry of entries) {
    const [addr = '', prefixText] = entry.split('/');
    const family = net.isIPv4(addr) ? 'ipv4' : net.isIPv6(addr) ? 'ipv6' : undefined;
    const max = family === 'ipv4' ? 32 : 128;
    const prefix = prefixText === undefined ? max : Number(prefixText);
    if (
      !family ||
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max ||
      (prefixText !== undefined && !/^\d+$/.test(prefixText))
    ) {
      throw new ConfigError([
        { variable: 'TRUSTED_PROXIES', reason: `"${entry}" is not an IP address or CIDR` },
      ]);
    }
    list.addSubnet(addr, prefix, family);
  }
  return list;
}

function isTrusted(list: net.BlockList, ip: string): boolean {
  const family = net.isIPv4(ip) ? 'ipv4' : net.isIPv6(ip) ? 'ipv6' : undefined;
  return family !== undefined && list.check(ip, family);
}

/**
 * The client's address: the socket peer, unless that peer is a trusted proxy, in which case
 * X-Forwarded-For is walked from the right past trusted proxies to the first untrusted hop.
 * A spoofed header from an untrusted peer is ignored.
 */
export function clientIp(req: Request, trusted: net.BlockList): string {
  const peer = normalizeIp(req.socket.remoteAddress ?? '');
  if (!isTrusted(trusted, peer)) return peer;
  const header = req.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((h) => normalizeIp(h.trim()));
  // Walk from the right: trusted proxies appended what they saw. Stop at the first entry that is
  // not an address — everything left of it may have been written by the client — and use the last
  // trusted hop seen.
  let last = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (net.isIP(hop) === 0) return last;
    if (!isTrusted(trusted, hop)) return hop;
    last = hop;
  }
  return last;
}
