import net from 'node:net';
import { InvalidArgumentError } from '@custos/service-kit';
import type { Conditions, PrincipalType, TimeWindow } from './grant-types.js';

const CONDITION_KEYS = new Set(['ip_cidrs', 'time_window', 'environment_in']);
const WINDOW_KEYS = new Set(['start', 'end', 'timezone', 'days']);
/** Weekday names of `time_window.days`, Monday first. */
export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
const CLOCK = /^([01]\d|2[0-3]):([0-5]\d)$/;
const MAX_CIDRS = 100;
const MAX_ENVIRONMENTS = 20;
const ENVIRONMENT = /^[A-Za-z0-9_.-]{1,64}$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Strips the IPv4-mapped IPv6 prefix so one client has one spelling. */
export function normalizeIp(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return mapped ? mapped[1]! : ip;
}

/** An address or `address/prefix` split into its parts, or undefined when it is neither. */
export function parseCidr(
  raw: string,
): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', prefixText, extra] = raw.split('/');
  if (extra !== undefined) return undefined;
  const version = net.isIP(address);
  if (version === 0) return undefined;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  const max = version === 4 ? 32 : 128;
  if (prefixText === undefined) return { address, prefix: max, family };
  if (!/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  return prefix <= max ? { address, prefix, family } : undefined;
}

/** Whether `ip` lies in any of `cidrs` (an unknown or malformed address lies in none). */
export function ipInCidrs(ip: string | undefined, cidrs: readonly string[]): boolean {
  if (!ip) return false;
  const addr = normalizeIp(ip);
  const version = net.isIP(addr);
  if (version === 0) return false;
  const list = new net.BlockList();
  for (const c of cidrs) {
    const p = parseCidr(c);
    if (p) list.addSubnet(p.address, p.prefix, p.family);
  }
  return list.check(addr, version === 4 ? 'ipv4' : 'ipv6');
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** Local weekday (`mon`…`sun`) and minute of the day of `now` in `tz`. */
export function localClock(now: Date, tz: string): { day: string; minute: number } {
  const parts = formatter(tz).formatToParts(now);
  const get = (t: string) => parts.find((p) => p.type === t)?.value ?? '';
  return {
    day: get('weekday').slice(0, 3).toLowerCase(),
    minute: Number(get('hour')) * 60 + Number(get('minute')),
  };
}

function minuteOf(clock: string): number {
  const m = CLOCK.exec(clock)!;
  return Number(m[1]) * 60 + Number(m[2]);
}

/**
 * Whether `now` falls inside the window: `start` inclusive, `end` exclusive, spanning midnight
 * when `start` is later than `end`; `days` name the local weekday of `now`.
 */
export function inTimeWindow(w: TimeWindow, now: Date): boolean {
  const { day, minute } = localClock(now, w.timezone ?? 'UTC');
  if (w.days && !w.days.includes(day)) return false;
  const start = minuteOf(w.start);
  const end = minuteOf(w.end);
  return start < end ? minute >= start && minute < end : minute >= start || minute < end;
}

/** Whether every condition of a grant holds for this request (fail closed on missing facts). */
export function conditionsHold(
  c: Conditions,
  facts: { clientIp?: string | undefined; environment?: string | undefined; now: Date },
): boolean {
  if (c.ip_cidrs && !ipInCidrs(facts.clientIp, c.ip_cidrs)) return false;
  if (c.time_window && !inTimeWindow(c.time_window, facts.now)) return false;
  if (
    c.environment_in &&
    (facts.environment === undefined || !c.environment_in.includes(facts.environment))
  ) {
    return false;
  }
  return true;
}

function stringList(v: unknown, field: string, max: number): string[] {
  if (!Array.isArray(v) || v.length === 0 || v.length > max) {
    throw new InvalidArgumentError(field, `${field} must be a list of 1 to ${max} strings`);
  }
  for (const s of v) {
    if (typeof s !== 'string') throw new InvalidArgumentError(field, `${field} must hold only strings`);
  }
  return [...new Set(v as string[])];
}

function parseTimeWindow(v: unknown): TimeWindow {
  const field = 'conditions.time_window';
  if (!isObject(v)) {
    throw new InvalidArgumentError(field, `${field} must be an object {start, end, timezone?, days?}`);
  }
  for (const k of Object.keys(v)) {
    if (!WINDOW_KEYS.has(k))
      throw new InvalidArgumentError(`${field}.${k}`, `${field}.${k} is not a field of a time window`);
  }
  const clock = (k: 'start' | 'end') => {
    const s = v[k];
    if (typeof s !== 'string' || !CLOCK.test(s)) {
      throw new InvalidArgumentError(
        `${field}.${k}`,
        `${field}.${k} must be a time of day HH:MM (00:00 to 23:59)`,
      );
    }
    return s;
  };
  const out: TimeWindow = { start: clock('start'), end: clock('end') };
  if (out.start === out.end) {
    throw new InvalidArgumentError(`${field}.end`, `${field}.end must differ from ${field}.start`);
  }
  const tz = v['timezone'];
  if (tz !== undefined && tz !== null) {
    if (typeof tz !== 'string' || tz.length > 64 || !isTimeZone(tz)) {
      throw new InvalidArgumentError(
        `${field}.timezone`,
        `${field}.timezone must be an IANA time zone, e.g. Europe/Berlin`,
      );
    }
    out.timezone = tz;
  }
  const days = v['days'];
  if (days !== undefined && days !== null) {
    const list = stringList(days, `${field}.days`, 7);
    if (!list.every((d) => (WEEKDAYS as readonly string[]).includes(d))) {
      throw new InvalidArgumentError(
        `${field}.days`,
        `${field}.days must name weekdays ${WEEKDAYS.join(', ')}`,
      );
    }
    out.days = WEEKDAYS.filter((d) => list.includes(d));
  }
  return out;
}

/**
 * Validates a grant's `conditions`, naming the first refused member with its dotted path. Null
 * or absent means no conditions. `environment_in` scopes agents; a user has no environment.
 */
export function parseConditions(v: unknown, principalType: PrincipalType): Conditions {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw new InvalidArgumentError('conditions', 'conditions must be a JSON object');
  for (const k of Object.keys(v)) {
    if (!CONDITION_KEYS.has(k)) {
      throw new InvalidArgumentError(
        `conditions.${k}`,
        `conditions.${k} is not a supported condition (ip_cidrs, time_window, environment_in)`,
      );
    }
  }
  const out: Conditions = {};
  if (v['ip_cidrs'] !== undefined && v['ip_cidrs'] !== null) {
    const field = 'conditions.ip_cidrs';
    const list = stringList(v['ip_cidrs'], field, MAX_CIDRS);
    for (const c of list) {
      if (!parseCidr(c)) {
        throw new InvalidArgumentError(
          field,
          `${field}: "${c.slice(0, 64)}" is not an IPv4/IPv6 address or CIDR`,
        );
      }
    }
    out.ip_cidrs = list;
  }
  if (v['time_window'] !== undefined && v['time_window'] !== null)
    out.time_window = parseTimeWindow(v['time_window']);
  if (v['environment_in'] !== undefined && v['environment_in'] !== null) {
    const field = 'conditions.environment_in';
    if (principalType !== 'agent') {
      throw new InvalidArgumentError(
        field,
        `${field} applies to agent grants only (a user has no environment)`,
      );
    }
    const list = stringList(v['environment_in'], field, MAX_ENVIRONMENTS);
    if (!list.every((e) => ENVIRONMENT.test(e))) {
      throw new InvalidArgumentError(
        field,
        `${field} must hold environment names (letters, digits, . _ -; 1 to 64)`,
      );
    }
    out.environment_in = list;
  }
  return out;
}
