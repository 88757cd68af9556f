import { InvalidArgumentError } from '@custos/service-kit';

/** The system vaults every org has; the general secrets API refuses them to everyone (SPEC §2.1). */
export const SYSTEM_VAULT_NAMES = ['__agent-keys', '__treasury-keys'] as const;

// Postgres text cannot hold NUL; other control characters in a name only serve to mislead.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** A vault name as stored: trimmed, 1..255 characters, not a reserved `__` name (DECISIONS.md). */
export function vaultName(raw: string): string {
  const name = raw.trim();
  if (name.length === 0) throw new InvalidArgumentError('name', 'name must not be empty');
  if ([...name].length > 255) throw new InvalidArgumentError('name', 'name must be at most 255 characters');
  if (CONTROL.test(name)) throw new InvalidArgumentError('name', 'name must not contain control characters');
  if (name.startsWith('__')) {
    throw new InvalidArgumentError('name', 'names starting with "__" are reserved for system vaults');
  }
  return name;
}

/** A vault description: at most 1,000 characters. */
export function vaultDescription(raw: string): string {
  if ([...raw].length > 1000) {
    throw new InvalidArgumentError('description', 'description must be at most 1000 characters');
  }
  if (raw.includes('\u0000')) {
    throw new InvalidArgumentError('description', 'description must not contain NUL characters');
  }
  return raw;
}
