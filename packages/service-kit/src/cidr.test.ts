import { formatNetwork, networkContains, normalizeCidr, parseIp, parseNetwork } from './cidr';

describe('normalizeCidr', () => {
  it.each([
    ['10.1.2.3/8', '10.0.0.0/8'],
    ['203.0.113.7', '203.0.113.7/32'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['192.168.1.255/23', '192.168.0.0/23'],
    ['2001:DB8:0:0:1::/32', '2001:db8::/32'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1/128'],
    ['::1', '::1/128'],
    ['::/0', '::/0'],
    ['2001:db8:0:1:0:0:0:1/128', '2001:db8:0:1::1/128'],
    ['2001:0:0:1:0:0:0:1/128', '2001:0:0:1::1/128'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1/128'],
    ['fe80::1:2/10', 'fe80::/10'],
    ['::ffff:10.9.8.7/104', '10.0.0.0/8'],
    ['::ffff:10.9.8.7', '10.9.8.7/32'],
    ['::ffff:0a09:0807/128', '10.9.8.7/32'],
    ['::ffff:0:0/95', '::fffe:0:0/95'],
    ['::1.2.3.4', '::102:304/128'],
  ])('%s → %s', (raw, normal) => {
    expect(normalizeCidr(raw)).toBe(normal);
  });

  it.each([
    '',
    'localhost',
    '10.0.0.0/33',
    '10.0.0.0/-1',
    '10.0.0.0/',
    '10.0.0.0/8/8',
    '10.0.0.256',
    '010.0.0.1',
    '10.0.0',
    '2001:db8::/129',
    '2001:db8:::1',
    'fe80::1%eth0',
    '1:2:3:4:5:6:7:8:9',
    '10.0.0.0/ 8',
    '10.0.0.0/0x8',
    // Legacy IPv4 spellings that tools read differently are never guessed at.
    '127.1',
    '0x7f.0.0.1',
    '2130706433',
    '127.000.000.001',
    '::ffff:010.0.0.1',
    '::ffff:127.1',
    ' 10.0.0.1',
    '10.0.0.1 ',
  ])('refuses %j', (raw) => {
    expect(normalizeCidr(raw)).toBeUndefined();
  });
});

describe('networkContains', () => {
  const net = (c: string) => parseNetwork(c)!;

  it('matches IPv4 clients by prefix', () => {
    expect(networkContains(net('10.0.0.0/8'), '10.255.1.2')).toBe(true);
    expect(networkContains(net('10.0.0.0/8'), '11.0.0.1')).toBe(false);
    expect(networkContains(net('203.0.113.7'), '203.0.113.7')).toBe(true);
    expect(networkContains(net('203.0.113.7'), '203.0.113.8')).toBe(false);
    expect(networkContains(net('0.0.0.0/0'), '198.51.100.1')).toBe(true);
  });

  it('matches IPv6 clients by prefix', () => {
    expect(networkContains(net('2001:db8::/32'), '2001:db8:ffff::1')).toBe(true);
    expect(networkContains(net('2001:db8::/32'), '2001:db9::1')).toBe(false);
    expect(networkContains(net('::/0'), '::1')).toBe(true);
    expect(networkContains(net('::/0'), '10.0.0.1')).toBe(false);
  });

  it('reads an IPv4-mapped IPv6 client as its IPv4 address', () => {
    expect(networkContains(net('10.0.0.0/8'), '::ffff:10.1.2.3')).toBe(true);
    expect(networkContains(net('10.0.0.0/8'), '::FFFF:0a01:0203')).toBe(true);
    expect(networkContains(net('::ffff:10.0.0.0/104'), '10.1.2.3')).toBe(true);
    expect(networkContains(net('2001:db8::/32'), '::ffff:10.1.2.3')).toBe(false);
  });

  it('matches nothing for a malformed client address', () => {
    expect(networkContains(net('0.0.0.0/0'), '')).toBe(false);
    expect(networkContains(net('0.0.0.0/0'), 'unknown')).toBe(false);
  });
});

describe('parseIp', () => {
  it('unwraps IPv4-mapped addresses', () => {
    expect(parseIp('::ffff:127.0.0.1')).toEqual({ family: 'ipv4', bytes: Uint8Array.from([127, 0, 0, 1]) });
  });

  it('keeps an IPv4-compatible address IPv6 (only ::ffff:0:0/96 is mapped)', () => {
    expect(parseIp('::127.0.0.1')).toEqual({
      family: 'ipv6',
      bytes: Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 0, 0, 1]),
    });
  });

  it('refuses what is not an address', () => {
    for (const raw of ['', 'localhost', '10.0.0.1/8', 'fe80::1%eth0', '1.2.3.4.5']) {
      expect(parseIp(raw)).toBeUndefined();
    }
  });
});

describe('formatNetwork', () => {
  it('writes what parseNetwork reads, canonically', () => {
    for (const cidr of ['10.0.0.0/8', '2001:db8::/32', '::/0', '0.0.0.0/0', '::fffe:0:0/95', 'fe80::/10']) {
      expect(formatNetwork(parseNetwork(cidr)!)).toBe(cidr);
    }
  });
});
