import type * as SplToken from '@solana/spl-token' with { 'resolution-mode': 'import' };

const QUIET = 'bigint: Failed to load bindings';

/**
 * `@solana/spl-token`, loaded with one load-time warning muted. It pulls `bigint-buffer`, whose
 * native binding is not built here (pnpm runs no install scripts for it), so it uses its pure-JS
 * fallback — correct, and fast enough for a transfer — and says so with a bare `console.warn` line
 * that would break signer's JSON-only output (and its "one line naming the variable" at a bad
 * start). Every other warning passes through.
 */
function loadQuietly(): typeof SplToken {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].startsWith(QUIET)) return;
    warn(...args);
  };
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('@solana/spl-token') as typeof SplToken;
  } finally {
    console.warn = warn;
  }
}

export const spl = loadQuietly();
