/**
 * Failures that mean "a dependency (Postgres, NATS, Redis) is unreachable or restarting", as
 * opposed to a bug: the caller should answer 503 and be asked again, never 500.
 */

// SQLSTATE: class 08 connection exceptions; 57P01-57P03 admin/crash shutdown and "starting up",
// 57P05 idle session timeout; 53xxx insufficient resources (53300 too many connections); 25006 a
// write on a server that became a read-only standby (a failover the connection has not seen yet).
const PG_OUTAGE_STATE = /^(08...|57P0[1235]|53...|25006)$/;
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
  // (not "Client was closed and is not queryable": that is a use after release, a bug)
  /encountered a connection error and is not queryable/,
  /timeout exceeded when trying to connect/,
  /^Connection is closed\.?$/,
  /^Reached the max retries per request limit/,
  /Stream isn't writeable/,
  // A Redis master demoted by a Sentinel failover, before the client has moved to the new one.
  /^READONLY /,
];
// nats.js (3.x) errors of a broker that is away, by class name (they carry no code).
const NATS_ERROR_NAMES = new Set(['ClosedConnectionError', 'DrainingConnectionError', 'ConnectionError']);

/** Whether `err` (or an error it wraps, e.g. Drizzle's DrizzleQueryError) is a dependency outage. */
export function isDependencyOutage(err: unknown): boolean {
  // Duck-typed, not instanceof: errors of Node's own modules come from another realm under jest.
  let e = asError(err);
  for (let depth = 0; e && depth < 5; e = asError(e.cause), depth++) {
    const code = e.code;
    if (typeof code === 'string' && (PG_OUTAGE_STATE.test(code) || NET_CODES.has(code))) return true;
    if (e.name === 'MaxRetriesPerRequestError') return true;
    if (typeof e.name === 'string' && NATS_ERROR_NAMES.has(e.name)) return true;
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
