/**
 * Canonical JSON: object keys sorted by code unit at every depth, no whitespace, arrays in order.
 * It is what Postgres `jsonb` preserves (key order and spacing are not), so a record read back
 * hashes to what was written.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const s = JSON.stringify(value);
    // undefined, functions and symbols have no JSON form; a value hashed here never holds them.
    if (s === undefined) throw new Error('value has no JSON form');
    return s;
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
