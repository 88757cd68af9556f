import { parseIp } from '@custos/service-kit';
import { type CompiledRule, compileRule, ipVerdict, ruleMatches } from './ip-filter-fns';

const ipBytes = (ip: string) => parseIp(ip)?.bytes;

let n = 0;
const rule = (cidr: string, ruleType: 'allow' | 'block' = 'allow'): CompiledRule => {
  const r = compileRule({ id: `r${++n}`, cidr, ruleType });
  if (!r) throw new Error(`cannot compile ${cidr}`);
  return r;
};
const matches = (cidr: string, ip: string) => ruleMatches(rule(cidr), ipBytes(ip)!);

describe('CIDR matching', () => {
  it('matches IPv4 clients by prefix', () => {
    expect(matches('10.0.0.0/8', '10.255.1.2')).toBe(true);
    expect(matches('10.0.0.0/8', '11.0.0.1')).toBe(false);
    expect(matches('192.168.0.0/23', '192.168.1.200')).toBe(true);
    expect(matches('192.168.0.0/23', '192.168.2.1')).toBe(false);
    expect(matches('203.0.113.7/32', '203.0.113.7')).toBe(true);
    expect(matches('203.0.113.7/32', '203.0.113.6')).toBe(false);
    expect(matches('0.0.0.0/0', '198.51.100.1')).toBe(true);
  });

  it('matches IPv6 clients by prefix, whatever their spelling', () => {
    expect(matches('2001:db8::/32', '2001:db8:ffff::1')).toBe(true);
    expect(matches('2001:db8::/32', '2001:DB8:0:0:0:0:0:1')).toBe(true);
    expect(matches('2001:db8::/32', '2001:db9::1')).toBe(false);
    expect(matches('2001:db8:0:1::/63', '2001:db8:0:1:ffff::')).toBe(true);
    expect(matches('2001:db8::/63', '2001:db8:0:2::1')).toBe(false);
    expect(matches('::1/128', '::1')).toBe(true);
    expect(matches('::/0', '2001:db8::1')).toBe(true);
  });

  it('never matches across families', () => {
    expect(matches('::/0', '10.0.0.1')).toBe(false);
    expect(matches('0.0.0.0/0', '2001:db8::1')).toBe(false);
  });

  it('reads an IPv4-mapped IPv6 client as its IPv4 address', () => {
    expect(matches('10.0.0.0/8', '::ffff:10.1.2.3')).toBe(true);
    expect(matches('10.0.0.0/8', '::FFFF:0a01:0203')).toBe(true);
    expect(matches('10.0.0.0/8', '::ffff:11.1.2.3')).toBe(false);
    expect(matches('::/0', '::ffff:10.1.2.3')).toBe(false);
  });

  it('reads nothing from a malformed address', () => {
    expect(ipBytes('')).toBeUndefined();
    expect(ipBytes('10.0.0.256')).toBeUndefined();
    expect(ipBytes('fe80::1%eth0')).toBeUndefined();
    expect(ipBytes('not-an-ip')).toBeUndefined();
  });

  it('refuses to compile a rule it cannot read', () => {
    expect(compileRule({ id: 'x', cidr: '10.0.0.0/33', ruleType: 'allow' })).toBeUndefined();
    expect(compileRule({ id: 'x', cidr: '10.0.0.0', ruleType: 'allow' })).toBeUndefined();
    expect(compileRule({ id: 'x', cidr: '10.0.0.0/8', ruleType: 'deny' })).toBeUndefined();
  });
});

describe('ipVerdict', () => {
  it('admits everyone when the org has no rules', () => {
    expect(ipVerdict([], '203.0.113.1')).toEqual({ allowed: true });
  });

  it('refuses a client a block rule covers, naming the first such rule', () => {
    const a = rule('203.0.113.0/24', 'block');
    const b = rule('203.0.113.7/32', 'block');
    expect(ipVerdict([a, b], '203.0.113.7')).toEqual({ allowed: false, reason: 'blocked', ruleId: a.id });
    expect(ipVerdict([a, b], '198.51.100.1')).toEqual({ allowed: true });
  });

  it('with allow rules, admits only the clients they cover', () => {
    const rules = [rule('10.0.0.0/8'), rule('2001:db8::/32')];
    expect(ipVerdict(rules, '10.1.1.1')).toEqual({ allowed: true });
    expect(ipVerdict(rules, '::ffff:10.1.1.1')).toEqual({ allowed: true });
    expect(ipVerdict(rules, '2001:db8::5')).toEqual({ allowed: true });
    expect(ipVerdict(rules, '192.0.2.1')).toEqual({ allowed: false, reason: 'not_allowed' });
    expect(ipVerdict(rules, '')).toEqual({ allowed: false, reason: 'not_allowed' });
  });

  it('lets a block rule win over an allow rule that also covers the client', () => {
    const block = rule('10.9.0.0/16', 'block');
    const rules = [rule('10.0.0.0/8'), block];
    expect(ipVerdict(rules, '10.9.1.1')).toEqual({ allowed: false, reason: 'blocked', ruleId: block.id });
    expect(ipVerdict(rules, '10.8.1.1')).toEqual({ allowed: true });
  });
});
