import { InvalidArgumentError } from '@custos/service-kit';

// Deliberately simple: one @, no spaces, a dot in the domain. Deliverability is proven by the
// verification e-mail, not by a regex.
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]{2,}$/;

/** Trims and lower-cases an e-mail address, or throws a 400 naming `field`. */
export function normalizeEmail(raw: unknown, field = 'email'): string {
  if (typeof raw !== 'string' || raw.trim() === '')
    throw new InvalidArgumentError(field, `${field} is required`);
  const email = raw.trim().toLowerCase();
  if (email.length > 254 || !EMAIL.test(email))
    throw new InvalidArgumentError(field, `${field} is not a valid e-mail address`);
  return email;
}

/** Validates an optional display name (≤ 100 characters, no control characters). */
export function normalizeDisplayName(raw: unknown, field = 'display_name'): string {
  if (raw === undefined || raw === null) return '';
  if (typeof raw !== 'string') throw new InvalidArgumentError(field, `${field} must be a string`);
  const name = raw.trim();
  // eslint-disable-next-line no-control-regex
  if (name.length > 100 || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new InvalidArgumentError(field, `${field} must be at most 100 printable characters`);
  }
  return name;
}

/** The name of the org a signup creates. */
export function defaultOrgName(email: string, displayName: string): string {
  return displayName ? `${displayName}'s org` : `${email.split('@')[0]}'s org`;
}
