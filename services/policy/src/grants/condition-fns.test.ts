import { InvalidArgumentError } from '@custos/service-kit';
import {
  checkConditions,
  conditionsHold,
  conditionsJson,
  conditionsOfJson,
  inTimeWindow,
  ipInCidrs,
  parseCidr,
} from './condition-fns';
import type { Conditions } from './grant-types';

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

describe('checkConditions', () => {
  it('accepts the three conditions and normalises them', () => {
    expect(
      checkConditions(
        {
          ipCidrs: ['10.0.0.0/8', '10.0.0.0/8', '2001:db8::/32'],
          timeWindow: { start: '09:00', end: '17:30', timezone: 'Europe/Berlin', days: ['fri', 'mon'] },
          environmentIn: ['production'],
        },
        'agent',
      ),
    ).toEqual({
      ipCidrs: ['10.0.0.0/8', '2001:db8::/32'],
      timeWindow: { start: '09:00', end: '17:30', timezone: 'Europe/Berlin', days: ['mon', 'fri'] },
      environmentIn: ['production'],
    });
    expect(checkConditions(undefined, 'user')).toEqual({});
    expect(checkConditions({}, 'user')).toEqual({});
  });
  it.each([
    [{ ipCidrs: [] }, 'conditions.ip_cidrs'],
    [{ ipCidrs: ['10.0.0.0/40'] }, 'conditions.ip_cidrs'],
    [{ ipCidrs: Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`) }, 'conditions.ip_cidrs'],
    [{ timeWindow: { start: '9:00', end: '17:00' } }, 'conditions.time_window.start'],
    [{ timeWindow: { start: '09:00', end: '24:00' } }, 'conditions.time_window.end'],
    [{ timeWindow: { start: '09:00', end: '09:00' } }, 'conditions.time_window.end'],
    [
      { timeWindow: { start: '09:00', end: '17:00', timezone: 'Mars/Olympus' } },
      'conditions.time_window.timezone',
    ],
    [{ timeWindow: { start: '09:00', end: '17:00', days: ['monday'] } }, 'conditions.time_window.days'],
    [{ timeWindow: { start: '09:00', end: '17:00', days: [] } }, 'conditions.time_window.days'],
    [{ environmentIn: [] }, 'conditions.environment_in'],
    [{ environmentIn: ['prod uction'] }, 'conditions.environment_in'],
  ] as Array<[Conditions, string]>)('refuses %j naming %s', (c, field) => {
    expect(refusal(() => checkConditions(c, 'agent'))).toBe(field);
  });
  it('refuses environment_in on a user grant', () => {
    expect(refusal(() => checkConditions({ environmentIn: ['production'] }, 'user'))).toBe(
      'conditions.environment_in',
    );
  });
  it('stores and reads back the JSON form', () => {
    const c = { ipCidrs: ['10.0.0.0/8'], timeWindow: { start: '01:00', end: '02:00' } };
    expect(conditionsJson(c)).toEqual({
      ip_cidrs: ['10.0.0.0/8'],
      time_window: { start: '01:00', end: '02:00' },
    });
    expect(conditionsOfJson(conditionsJson(c))).toEqual(c);
    expect(conditionsOfJson(null)).toEqual({});
  });
});

describe('conditionsHold', () => {
  const now = new Date('2030-01-07T12:00:00Z');
  it('holds with no conditions and fails closed on missing facts', () => {
    expect(conditionsHold({}, { now })).toBe(true);
    expect(conditionsHold({ ipCidrs: ['0.0.0.0/0'] }, { now })).toBe(false);
    expect(conditionsHold({ environmentIn: ['production'] }, { now })).toBe(false);
  });
  it('needs every present condition', () => {
    const c = {
      ipCidrs: ['10.0.0.0/8'],
      environmentIn: ['production'],
      timeWindow: { start: '11:00', end: '13:00' },
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
