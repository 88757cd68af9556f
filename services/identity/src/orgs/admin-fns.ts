import { InvalidArgumentError } from '@custos/service-kit';

const SETTING_NAME = /^[a-z0-9_.-]{1,64}$/;
/** The longest value a platform setting may hold, in characters. */
export const MAX_SETTING_VALUE_LENGTH = 4096;

/**
 * Settings whose value the platform reads, with the values they accept. Any other name holds any
 * string; these are checked so that a typo cannot silently switch a behaviour off.
 */
export const KNOWN_SETTINGS: Readonly<Record<string, readonly string[]>> = {
  /** Spec §3: widening guardrail edits wait for an approval when this is "true". */
  guardrail_changes_require_approval: ['true', 'false'],
};

/** A setting name (`^[a-z0-9_.-]{1,64}$`), or a 400 naming `name`. */
export function parseSettingName(raw: unknown): string {
  if (typeof raw !== 'string' || !SETTING_NAME.test(raw)) {
    throw new InvalidArgumentError(
      'name',
      'name must be 1 to 64 characters of lower-case letters, digits, `_`, `.` and `-`',
    );
  }
  return raw;
}

/** A setting value: a string of at most 4096 characters, one of the allowed values of a known setting. */
export function parseSettingValue(name: string, raw: unknown): string {
  if (raw === undefined || raw === null) throw new InvalidArgumentError('value', 'value is required');
  if (typeof raw !== 'string') throw new InvalidArgumentError('value', 'value must be a string');
  if (raw.length > MAX_SETTING_VALUE_LENGTH) {
    throw new InvalidArgumentError('value', `value must be at most ${MAX_SETTING_VALUE_LENGTH} characters`);
  }
  const allowed = Object.hasOwn(KNOWN_SETTINGS, name) ? KNOWN_SETTINGS[name] : undefined;
  if (allowed && !allowed.includes(raw)) {
    throw new InvalidArgumentError(
      'value',
      `${name} must be one of ${allowed.map((v) => `"${v}"`).join(', ')}`,
    );
  }
  return raw;
}

/** Paging of the admin user list: limit 1..1000 (default 100), offset ≥ 0 (default 0). */
export function parsePage(limit: unknown, offset: unknown): { limit: number; offset: number } {
  const l = limit === undefined || limit === null ? 100 : limit;
  const o = offset === undefined || offset === null ? 0 : offset;
  if (typeof l !== 'number' || !Number.isInteger(l) || l < 1 || l > 1000) {
    throw new InvalidArgumentError('limit', 'limit must be an integer from 1 to 1000');
  }
  if (typeof o !== 'number' || !Number.isInteger(o) || o < 0) {
    throw new InvalidArgumentError('offset', 'offset must be an integer of 0 or more');
  }
  return { limit: l, offset: o };
}
