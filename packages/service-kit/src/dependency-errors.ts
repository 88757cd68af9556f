/**
 * Failures that mean "a dependency (Postgres, NATS, Redis) is unreachable or restarting", as
 * opposed to a bug: the caller should answer 503 and be asked again, never 500.
 */

// SQLSTATE: class 08 connection exceptions; 57P01-57P03 admin/crash shutdown and "starting up";
// 53300 too many connections; 53xxx insufficient resources in general.
const PG_OUTAGE_STATE = /^(08...|57P0[1-3]|53...)$/;
// Socket failures Node reports by code.
const NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
// pg's, pg-pool's and ioredis's own wording for a connection that is gone or was never made.
const MESSAGES = [
  /^Connection terminated/,
  /not queryable/,
  /timeout exceeded when trying to connect/,
  /^Connection is closed\.?$/,
  /^Reached the max retries per request limit/,
  /Stream isn't writeable/,
];
// nats.js error codes of a broker that is away (not of a refused request).
const NATS_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_DRAINING', 'DISCONNECT', 'CONNECTION_REFUSED']);

/** Whether `err` (or an error it wraps, e.g. Drizzle's DrizzleQueryError) is a dependency outage. */
export function isDependencyOutage(err: unknown): boolean {
  // Duck-typed, not instanceof: errors of Node's own modules come from another realm under jest.
  let e = asError(err);
  for (let depth = 0; e && depth < 5; e = asError(e.cause), depth++) {
    const code = e.code;
    if (
      typeof code === 'string' &&
      (PG_OUTAGE_STATE.test(code) || NET_CODES.has(code) || NATS_CODES.has(code))
    )
      return true;
    if (e.name === 'MaxRetriesPerRequestError') return true;
    const message = e.message;
    if (typeof message === 'string' && MESSAGES.some((re) => re.test(message))) return true;
  }
  return false;
}

function asError(
  v: unknown,
): { code?: unknown; name?: unknown; message?: unknown; cause?: unknown } | undefined {
  return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
}
