import { InvalidArgumentError } from '@custos/service-kit';
import { conditionsHold, inTimeWindow, ipInCidrs, parseCidr, parseConditions } from './condition-fns';

function refusal(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

describe('CIDRs', () => {
  it('parses IPv4 and IPv6 CIDRs and bare addresses', () => {
    expect(parseCidr('10.0.0.0/8')).toEqual({ address: '10.0.0.0', prefix: 8, family: 'ipv4' });
    expect(parseCidr('2001:db8::/32')).toEqual({ address: '2001:db8::', prefix: 32, family: 'ipv6' });
    expect(parseCidr('192.0.2.7')).toEqual({ address: '192.0.2.7', prefix: 32, family: 'ipv4' });
  });
  it.each(['10.0.0.0/33', '::/129', '10.0.0/8', '10.0.0.0/', '10.0.0.0/8/1', 'host/8', '10.0.0.0/+8', ''])(
    'refuses %j',
    (c) => expect(parseCidr(c)).toBeUndefined(),
  );
  it('matches addresses, IPv4-mapped IPv6 included, and never an unknown one', () => {
    expect(ipInCidrs('10.1.2.3', ['10.0.0.0/8'])).toBe(true);
    expect(ipInCidrs('::ffff:10.1.2.3', ['10.0.0.0/8'])).toBe(true);
    expect(ipInCidrs('11.1.2.3', ['10.0.0.0/8'])).toBe(false);
    expect(ipInCidrs('2001:db8::1', ['2001:db8::/32'])).toBe(true);
    expect(ipInCidrs('2001:db9::1', ['2001:db8::/32', '10.0.0.0/8'])).toBe(false);
    expect(ipInCidrs('192.0.2.7', ['192.0.2.7'])).toBe(true);
    expect(ipInCidrs(undefined, ['0.0.0.0/0'])).toBe(false);
    expect(ipInCidrs('not-an-ip', ['0.0.0.0/0'])).toBe(false);
  });
});

describe('time windows', () => {
  const at = (iso: string) => new Date(iso);
  it('is start-inclusive and end-exclusive in UTC by default', () => {
    const w = { start: '09:00', end: '17:00' };
    expect(inTimeWindow(w, at('2030-01-07T09:00:00Z'))).toBe(true);
    expect(inTimeWindow(w, at('2030-01-07T16:59:59Z'))).toBe(true);
    expect(inTimeWindow(w, at('2030-01-07T17:00:00Z'))).toBe(false);
    expect(inTimeWindow(w, at('2030-01-07T08:59:00Z'))).toBe(false);
  });
  it('spans midnight when start is later than end', () => {
    const w = { start: '22:00', end: '06:00' };
    expect(inTimeWindow(w, at('2030-01-07T23:30:00Z'))).toBe(true);
    expect(inTimeWindow(w, at('2030-01-07T05:59:00Z'))).toBe(true);
    expect(inTimeWindow(w, at('2030-01-07T12:00:00Z'))).toBe(false);
  });
  it('reads the clock and weekday in the named time zone', () => {
    // 2030-01-07 is a Monday; 23:30 UTC is already Tuesday 08:30 in Tokyo.
    const w = { start: '08:00', end: '09:00', timezone: 'Asia/Tokyo', days: ['tue'] };
    expect(inTimeWindow(w, at('2030-01-07T23:30:00Z'))).toBe(true);
    expect(inTimeWindow({ ...w, days: ['mon'] }, at('2030-01-07T23:30:00Z'))).toBe(false);
  });
});

describe('parseConditions', () => {
  it('accepts the three conditions and normalises them', () => {
    expect(
      parseConditions(
        {
          ip_cidrs: ['10.0.0.0/8', '10.0.0.0/8', '2001:db8::/32'],
          time_window: { start: '09:00', end: '17:30', timezone: 'Europe/Berlin', days: ['fri', 'mon'] },
          environment_in: ['production'],
        },
        'agent',
      ),
    ).toEqual({
      ip_cidrs: ['10.0.0.0/8', '2001:db8::/32'],
      time_window: { start: '09:00', end: '17:30', timezone: 'Europe/Berlin', days: ['mon', 'fri'] },
      environment_in: ['production'],
    });
    expect(parseConditions(undefined, 'user')).toEqual({});
    expect(parseConditions(null, 'user')).toEqual({});
    expect(parseConditions({}, 'user')).toEqual({});
  });
  it.each([
    [[1], 'conditions'],
    ['x', 'conditions'],
    [{ geo: 'eu' }, 'conditions.geo'],
    [{ ip_cidrs: '10.0.0.0/8' }, 'conditions.ip_cidrs'],
    [{ ip_cidrs: [] }, 'conditions.ip_cidrs'],
    [{ ip_cidrs: ['10.0.0.0/40'] }, 'conditions.ip_cidrs'],
    [{ ip_cidrs: [7] }, 'conditions.ip_cidrs'],
    [{ time_window: '9-5' }, 'conditions.time_window'],
    [{ time_window: { start: '9:00', end: '17:00' } }, 'conditions.time_window.start'],
    [{ time_window: { start: '09:00', end: '24:00' } }, 'conditions.time_window.end'],
    [{ time_window: { start: '09:00', end: '09:00' } }, 'conditions.time_window.end'],
    [
      { time_window: { start: '09:00', end: '17:00', timezone: 'Mars/Olympus' } },
      'conditions.time_window.timezone',
    ],
    [{ time_window: { start: '09:00', end: '17:00', days: ['monday'] } }, 'conditions.time_window.days'],
    [{ time_window: { start: '09:00', end: '17:00', tz: 'UTC' } }, 'conditions.time_window.tz'],
    [{ environment_in: [] }, 'conditions.environment_in'],
    [{ environment_in: ['prod uction'] }, 'conditions.environment_in'],
    [{ environment_in: 'production' }, 'conditions.environment_in'],
  ])('refuses %j naming %s', (c, field) => {
    expect(refusal(() => parseConditions(c, 'agent'))).toBe(field);
  });
  it('refuses environment_in on a user grant', () => {
    expect(refusal(() => parseConditions({ environment_in: ['production'] }, 'user'))).toBe(
      'conditions.environment_in',
    );
  });
});

describe('conditionsHold', () => {
  const now = new Date('2030-01-07T12:00:00Z');
  it('holds with no conditions and fails closed on missing facts', () => {
    expect(conditionsHold({}, { now })).toBe(true);
    expect(conditionsHold({ ip_cidrs: ['0.0.0.0/0'] }, { now })).toBe(false);
    expect(conditionsHold({ environment_in: ['production'] }, { now })).toBe(false);
  });
  it('needs every present condition', () => {
    const c = {
      ip_cidrs: ['10.0.0.0/8'],
      environment_in: ['production'],
      time_window: { start: '11:00', end: '13:00' },
    };
    expect(conditionsHold(c, { now, clientIp: '10.0.0.1', environment: 'production' })).toBe(true);
    expect(conditionsHold(c, { now, clientIp: '10.0.0.1', environment: 'preview' })).toBe(false);
    expect(conditionsHold(c, { now, clientIp: '11.0.0.1', environment: 'production' })).toBe(false);
    expect(
      conditionsHold(c, {
        now: new Date('2030-01-07T14:00:00Z'),
        clientIp: '10.0.0.1',
        environment: 'production',
      }),
    ).toBe(false);
  });
});
