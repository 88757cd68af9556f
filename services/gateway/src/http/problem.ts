import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { match } from 'path-to-regexp';
import {
  CustosError,
  ERROR_KINDS,
  RateLimitedError,
  UnavailableError,
  describeError,
  isDependencyOutage,
  type Logger,
} from '@custos/service-kit';
import { sendJson } from './respond.js';
import type { DeclaredRoute } from './routes.js';

/** An RFC 7807 problem-details body, with optional extension members. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/** Sends a problem-details response (`application/problem+json; charset=utf-8`). */
export function sendProblem(res: Response, problem: Problem): void {
  sendJson(res, problem.status, problem, 'application/problem+json; charset=utf-8');
}

/** The problem-details body of a CustosError. */
export function problemOf(err: CustosError): Problem {
  return {
    ...err.extensions,
    type: err.type,
    title: err.title,
    status: err.httpStatus,
    detail: err.detail,
    ...(err.field ? { field: err.field } : {}),
  };
}

/**
 * For a request nothing answered: 405 with `Allow` when the path is a route's under another
 * method, else 404.
 */
export function notFound(routes: readonly DeclaredRoute[]): RequestHandler {
  let matchers: Array<{ method: string; noHead: boolean; matches: (path: string) => boolean }> | undefined;
  return (req, res) => {
    matchers ??= routes.map((r) => {
      const fn = match(r.path, { decode: false });
      return {
        method: r.method,
        noHead: r.spec.noHead === true,
        matches: (path: string) => fn(path) !== false,
      };
    });
    const matching = matchers.filter((m) => m.matches(req.path));
    const allowed = new Set(matching.map((m) => m.method));
    if (allowed.size > 0) {
      // HEAD runs a GET, except where the GET reads a value (RouteSpec.noHead: HEAD is 405 there).
      if (matching.some((m) => m.method === 'GET' && !m.noHead)) allowed.add('HEAD');
      const allow = [...allowed].sort().join(', ');
      res.setHeader('Allow', allow);
      return sendProblem(res, {
        type: 'about:blank',
        title: 'Method Not Allowed',
        status: 405,
        detail: `${req.method} is not allowed on ${req.path}; allowed: ${allow}`,
      });
    }
    sendProblem(res, {
      type: 'about:blank',
      title: ERROR_KINDS.not_found.title,
      status: 404,
      detail: `no route for ${req.method} ${req.path}`,
    });
  };
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * 415 for a `/v1` request that carries a body in anything but JSON: the API reads only JSON, and
 * a form or text body would otherwise look empty and be refused for a missing field.
 */
export function requireJsonBody(formPaths: readonly string[] = []): RequestHandler {
  const forms = new Set(formPaths);
  return (req, _res, next) => {
    const hasBody =
      Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
    if (!hasBody || !req.path.startsWith('/v1/')) return next();
    const type = req.headers['content-type'] ?? '';
    if (JSON_TYPE.test(type)) return next();
    if (forms.has(req.path) && /^application\/x-www-form-urlencoded\s*(?:;|$)/i.test(type)) return next();
    next(
      new CustosError('unsupported_media_type', {
        field: 'content-type',
        detail: type
          ? `content type ${type.split(';')[0]!.trim()} is not supported; send application/json`
          : 'the request has a body but no content type; send application/json',
      }),
    );
  };
}

/**
 * How long a client should wait after a 503 that names no time: a peer service or one of its
 * dependencies (Postgres, NATS, Redis) is down, and they come back within seconds (docs/operations.md).
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = '5';

/** `Retry-After` for an error that says when to come back (rate limits, lockouts, outages). */
function setRetryAfter(res: Response, err: CustosError): void {
  const seconds =
    err instanceof RateLimitedError
      ? String(err.retryAfterSeconds)
      : (err.extensions['retry_after'] ??
        (err.kind === 'unavailable' ? UNAVAILABLE_RETRY_AFTER_SECONDS : undefined));
  if (seconds && /^\d+$/.test(seconds)) res.setHeader('Retry-After', seconds);
}

interface BodyParserError {
  type?: string;
  status?: number;
}

/**
 * Last middleware: renders every failure as problem details. Unknown errors are logged without a
 * stack and answered with a generic 500, so nothing internal leaks.
 */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, _req, res, next) => {
    if (res.headersSent) return next(err);
    if (err instanceof CustosError) {
      setRetryAfter(res, err);
      return sendProblem(res, problemOf(err));
    }
    const bp = err as BodyParserError;
    if (bp?.type === 'entity.parse.failed') {
      return sendProblem(res, {
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail: 'request body is not valid JSON',
        field: 'body',
      });
    }
    if (bp?.type === 'entity.too.large') {
      return sendProblem(res, {
        type: 'about:blank',
        title: 'Content Too Large',
        status: 413,
        detail: 'request body is too large',
        field: 'body',
      });
    }
    if (bp?.type === 'encoding.unsupported' || bp?.type === 'charset.unsupported') {
      return sendProblem(res, {
        type: 'about:blank',
        title: 'Unsupported Media Type',
        status: 415,
        detail: 'unsupported body encoding',
        field: 'body',
      });
    }
    if (typeof bp?.status === 'number' && bp.status >= 400 && bp.status < 500) {
      return sendProblem(res, {
        type: 'about:blank',
        title: 'Bad Request',
        status: bp.status,
        detail: 'request could not be read',
      });
    }
    if (isDependencyOutage(err)) {
      // The gateway's own Redis away (or a peer's connection cut mid-call): 503, asked again.
      logger.warn({ err: describeError(err) }, 'a dependency is unavailable; request refused');
      const unavailable = new UnavailableError('a dependency of the service is unavailable; retry shortly');
      setRetryAfter(res, unavailable);
      return sendProblem(res, problemOf(unavailable));
    }
    logger.error({ err: describeError(err) }, 'unhandled error in HTTP handler');
    sendProblem(res, {
      type: 'about:blank',
      title: ERROR_KINDS.internal.title,
      status: 500,
      detail: 'internal error',
    });
  };
}
