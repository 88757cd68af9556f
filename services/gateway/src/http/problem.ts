import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { CustosError, ERROR_KINDS, RateLimitedError, describeError, type Logger } from '@custos/service-kit';

/** An RFC 7807 problem-details body, with optional extension members. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/** Sends a problem-details response. */
export function sendProblem(res: Response, problem: Problem): void {
  res.status(problem.status).type('application/problem+json').json(problem);
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

/** 404 for every route nothing answered. */
export const notFound: RequestHandler = (req, res) => {
  sendProblem(res, {
    type: 'about:blank',
    title: ERROR_KINDS.not_found.title,
    status: 404,
    detail: `no route for ${req.method} ${req.path}`,
  });
};

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
    if (err instanceof RateLimitedError) res.setHeader('Retry-After', String(err.retryAfterSeconds));
    if (err instanceof CustosError) return sendProblem(res, problemOf(err));
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
    logger.error({ err: describeError(err) }, 'unhandled error in HTTP handler');
    sendProblem(res, {
      type: 'about:blank',
      title: ERROR_KINDS.internal.title,
      status: 500,
      detail: 'internal error',
    });
  };
}
