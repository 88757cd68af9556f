import net from 'node:net';
import type { Request } from 'express';
import { ConfigError } from '@custos/service-kit';

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
    .map((h) => normalizeIp(h.trim()))
    .filter((h) => net.isIP(h) !== 0);
  for (let i = hops.length - 1; i >= 0; i--) {
    if (!isTrusted(trusted, hops[i]!)) return hops[i]!;
  }
  return hops[0] ?? peer;
}
