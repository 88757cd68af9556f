/** Keys whose values are never logged, whatever their depth. */
const SECRET_KEY =
  /pass(word|phrase)?|secret|token|api[_-]?key|authorization|cookie|private[_-]?key|mnemonic|seed|^value$|^code$|credential|^key$|signature|x-auth-confirm|x-passkey-token/i;

export const REDACTED = '[redacted]';

/** Returns a copy of `input` with the values of secret-bearing keys replaced. */
export function redactSecrets(input: unknown, depth = 0): unknown {
  if (depth > 8 || input === null || typeof input !== 'object') return input;
  if (Array.isArray(input)) return input.map((v) => redactSecrets(v, depth + 1));
  if (input instanceof Error) return input;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(input as Record<string, unknown>)) {
    out[k] = SECRET_KEY.test(k) && v !== undefined && v !== null ? REDACTED : redactSecrets(v, depth + 1);
  }
  return out;
}
