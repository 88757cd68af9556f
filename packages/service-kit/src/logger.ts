import { trace } from '@opentelemetry/api';
import pino from 'pino';
import { redactSecrets } from './redact.js';
import { currentRequestContext } from './request-context.js';

/** The structured JSON logger every service uses. */
export type Logger = pino.Logger;

/**
 * Serialises an error without its stack, SQL text or driver detail (which can echo stored values).
 * Query errors (pg's DatabaseError, drizzle's DrizzleQueryError wrapping one) keep only codes and
 * names. Idempotent: an already described error passes through unchanged.
 */
export function describeError(err: unknown): Record<string, unknown> {
  // A plain object is an error described already (call sites log `{err: describeError(e)}`).
  if (err !== null && typeof err === 'object' && !(err instanceof Error))
    return err as Record<string, unknown>;
  if (!(err instanceof Error)) return { message: typeof err === 'string' ? err : 'non-error thrown' };
  const e = err as Error & {
    code?: unknown;
    constraint?: unknown;
    table?: unknown;
    routine?: unknown;
    cause?: unknown;
  };
  if (e.constructor?.name === 'DatabaseError' || e.name === 'DatabaseError') {
    return {
      name: 'DatabaseError',
      pg_code: e.code,
      constraint: e.constraint,
      table: e.table,
      routine: e.routine,
    };
  }
  // Drizzle's message is "Failed query: <SQL> params: <values>": never log it, only its cause.
  if (e.constructor?.name === 'DrizzleQueryError' || /^Failed query:/.test(e.message)) {
    return { name: 'QueryError', ...(e.cause ? { cause: describeError(e.cause) } : {}) };
  }
  return {
    name: e.name,
    message: e.message,
    ...(typeof e.code === 'string' ? { error_code: e.code } : {}),
    ...(e.cause ? { cause: describeError(e.cause) } : {}),
  };
}

/** Creates a JSON logger that tags each line with the service, trace and request ids and redacts secrets. */
export function createLogger(opts: {
  service: string;
  level?: string;
  destination?: pino.DestinationStream;
}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { service: opts.service },
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        log: (obj) => redactSecrets(obj) as Record<string, unknown>,
      },
      serializers: { err: describeError, error: describeError },
      mixin() {
        const span = trace.getActiveSpan()?.spanContext();
        const req = currentRequestContext();
        return {
          ...(span ? { trace_id: span.traceId, span_id: span.spanId } : {}),
          ...(req ? { request_id: req.requestId } : {}),
        };
      },
    },
    opts.destination,
  );
}
