import net from 'node:net';
import { InvalidArgumentError } from '@custos/service-kit';
import type { Conditions, PrincipalType, TimeWindow } from './grant-types.js';

/** Weekday names of `time_window.days`, Monday first. */
export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
const CLOCK = /^([01]\d|2[0-3]):([0-5]\d)$/;
const MAX_CIDRS = 100;
const MAX_ENVIRONMENTS = 20;
const ENVIRONMENT = /^[A-Za-z0-9_.-]{1,64}$/;

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
  if (c.ipCidrs && !ipInCidrs(facts.clientIp, c.ipCidrs)) return false;
  if (c.timeWindow && !inTimeWindow(c.timeWindow, facts.now)) return false;
  if (c.environmentIn && (facts.environment === undefined || !c.environmentIn.includes(facts.environment))) {
    return false;
  }
  return true;
}

function list(v: readonly string[], field: string, max: number): string[] {
  if (v.length === 0 || v.length > max) {
    throw new InvalidArgumentError(field, `${field} must be a list of 1 to ${max} strings`);
  }
  return [...new Set(v)];
}

function checkTimeWindow(w: TimeWindow): TimeWindow {
  const field = 'conditions.time_window';
  const clock = (k: 'start' | 'end') => {
    if (!CLOCK.test(w[k])) {
      throw new InvalidArgumentError(
        `${field}.${k}`,
        `${field}.${k} must be a time of day HH:MM (00:00 to 23:59)`,
      );
    }
    return w[k];
  };
  const out: TimeWindow = { start: clock('start'), end: clock('end') };
  if (out.start === out.end) {
    throw new InvalidArgumentError(`${field}.end`, `${field}.end must differ from ${field}.start`);
  }
  if (w.timezone !== undefined) {
    if (w.timezone.length > 64 || !isTimeZone(w.timezone)) {
      throw new InvalidArgumentError(
        `${field}.timezone`,
        `${field}.timezone must be an IANA time zone, e.g. Europe/Berlin`,
      );
    }
    out.timezone = w.timezone;
  }
  if (w.days !== undefined) {
    const days = list(w.days, `${field}.days`, 7);
    if (!days.every((d) => (WEEKDAYS as readonly string[]).includes(d))) {
      throw new InvalidArgumentError(
        `${field}.days`,
        `${field}.days must name weekdays ${WEEKDAYS.join(', ')}`,
      );
    }
    out.days = WEEKDAYS.filter((d) => days.includes(d));
  }
  return out;
}

/**
 * Checks a grant's conditions and normalises them (duplicates dropped, weekdays in order), naming
 * the first refused one with its dotted path. `environment_in` scopes agents; a user has none.
 */
export function checkConditions(c: Conditions | undefined, principalType: PrincipalType): Conditions {
  const out: Conditions = {};
  if (!c) return out;
  if (c.ipCidrs !== undefined) {
    const field = 'conditions.ip_cidrs';
    const cidrs = list(c.ipCidrs, field, MAX_CIDRS);
    for (const cidr of cidrs) {
      if (!parseCidr(cidr)) {
        throw new InvalidArgumentError(
          field,
          `${field}: "${cidr.slice(0, 64)}" is not an IPv4/IPv6 address or CIDR`,
        );
      }
    }
    out.ipCidrs = cidrs;
  }
  if (c.timeWindow !== undefined) out.timeWindow = checkTimeWindow(c.timeWindow);
  if (c.environmentIn !== undefined) {
    const field = 'conditions.environment_in';
    if (principalType !== 'agent') {
      throw new InvalidArgumentError(
        field,
        `${field} applies to agent grants only (a user has no environment)`,
      );
    }
    const envs = list(c.environmentIn, field, MAX_ENVIRONMENTS);
    if (!envs.every((e) => ENVIRONMENT.test(e))) {
      throw new InvalidArgumentError(
        field,
        `${field} must hold environment names (letters, digits, . _ -; 1 to 64)`,
      );
    }
    out.environmentIn = envs;
  }
  return out;
}

/** The JSON a grant's conditions are stored and announced in (`{ip_cidrs?, time_window?, environment_in?}`). */
export function conditionsJson(c: Conditions): Record<string, unknown> {
  return {
    ...(c.ipCidrs ? { ip_cidrs: [...c.ipCidrs] } : {}),
    ...(c.timeWindow ? { time_window: { ...c.timeWindow } } : {}),
    ...(c.environmentIn ? { environment_in: [...c.environmentIn] } : {}),
  };
}

/** The conditions of their stored JSON (written by `conditionsJson`). */
export function conditionsOfJson(json: unknown): Conditions {
  const j = (json ?? {}) as {
    ip_cidrs?: string[];
    time_window?: TimeWindow;
    environment_in?: string[];
  };
  return {
    ...(j.ip_cidrs ? { ipCidrs: j.ip_cidrs } : {}),
    ...(j.time_window ? { timeWindow: j.time_window } : {}),
    ...(j.environment_in ? { environmentIn: j.environment_in } : {}),
  };
}
