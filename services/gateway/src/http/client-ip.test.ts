import type { Request } from 'express';
import { ConfigError } from '@custos/service-kit';
import { clientIp, normalizeIp, parseTrustedProxies, rateLimitBucket } from './client-ip';

function req(remoteAddress: string, xff?: string): Request {
  return {
    socket: { remoteAddress },
    headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
  } as unknown as Request;
}

describe('clientIp', () => {
  const trusted = parseTrustedProxies(['10.0.0.0/8', '::1']);

  it('uses the socket address when the peer is not a trusted proxy, ignoring X-Forwarded-For', () => {
    expect(clientIp(req('203.0.113.9', '1.2.3.4'), trusted)).toBe('203.0.113.9');
    expect(clientIp(req('::ffff:203.0.113.9', '1.2.3.4'), trusted)).toBe('203.0.113.9');
  });

  it('walks X-Forwarded-For from the right past trusted proxies', () => {
    expect(clientIp(req('10.1.1.1', '198.51.100.7, 10.2.2.2'), trusted)).toBe('198.51.100.7');
    // A client-supplied left-most entry cannot override the first untrusted hop.
    expect(clientIp(req('10.1.1.1', '1.1.1.1, 198.51.100.7, 10.2.2.2'), trusted)).toBe('198.51.100.7');
    expect(clientIp(req('::1', '2001:db8::5'), trusted)).toBe('2001:db8::5');
  });

  it('falls back to the peer when the header is missing or holds no address', () => {
    expect(clientIp(req('10.1.1.1'), trusted)).toBe('10.1.1.1');
    expect(clientIp(req('10.1.1.1', 'garbage, also-garbage'), trusted)).toBe('10.1.1.1');
  });

  it('stops at an entry that is not an address instead of skipping to what the client wrote', () => {
    // A proxy that appends ip:port makes the real entry unparsable; the spoofed left entry must not win.
    expect(clientIp(req('10.1.1.1', '6.6.6.6, 198.51.100.7:4711'), trusted)).toBe('10.1.1.1');
    expect(clientIp(req('10.1.1.1', '6.6.6.6, junk, 10.2.2.2'), trusted)).toBe('10.2.2.2');
  });

  it('buckets IPv6 clients by /64 and IPv4 by address', () => {
    expect(rateLimitBucket('2001:db8:1:2:aaaa::1')).toBe(rateLimitBucket('2001:db8:1:2:ffff:1:2:3'));
    expect(rateLimitBucket('2001:db8:1:2::1')).not.toBe(rateLimitBucket('2001:db8:1:3::1'));
    expect(rateLimitBucket('192.0.2.1')).toBe('192.0.2.1');
  });

  it('normalises IPv4-mapped IPv6', () => {
    expect(normalizeIp('::FFFF:127.0.0.1')).toBe('127.0.0.1');
    expect(normalizeIp('2001:db8::1')).toBe('2001:db8::1');
  });

  it('rejects malformed TRUSTED_PROXIES entries with a ConfigError naming the variable', () => {
    for (const bad of ['10.0.0.0/33', 'example.com', '10.0.0.0/', '::1/129', '10.0.0.0/8x']) {
      expect(() => parseTrustedProxies([bad])).toThrow(ConfigError);
      expect(() => parseTrustedProxies([bad])).toThrow(/TRUSTED_PROXIES/);
    }
  });
});
