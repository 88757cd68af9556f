import { randomUUID } from 'node:crypto';
import type net from 'node:net';
import type { RequestHandler } from 'express';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { extractTraceContext, runWithRequestContext, tracer } from '@custos/service-kit';
import { loggablePath } from './access-log.js';
import { clientIp } from './client-ip.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** Request id: the caller's X-Request-Id when well-formed, otherwise a new UUID. */
      requestId: string;
      /** The client's address (see clientIp). */
      clientIp: string;
    }
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * First middleware: assigns the request id (echoed in X-Request-Id), resolves the client IP, opens
 * the server span from any incoming W3C trace context, and runs the rest of the pipeline inside
 * the request context so downstream gRPC calls carry the id, the trace and the caller's JWT.
 */
export function requestContext(trustedProxies: net.BlockList): RequestHandler {
  return (req, res, next) => {
    const incoming = req.header('x-request-id');
    req.requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    req.clientIp = clientIp(req, trustedProxies);
    res.setHeader('X-Request-Id', req.requestId);
    const parent = extractTraceContext(req.headers);
    const span = tracer().startSpan(
      `HTTP ${req.method}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': req.method, 'url.path': loggablePath(req.path) },
      },
      parent,
    );
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      if (route) span.updateName(`HTTP ${req.method} ${route}`);
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    const bearer = req.header('authorization');
    context.with(trace.setSpan(parent, span), () =>
      runWithRequestContext(
        {
          requestId: req.requestId,
          clientIp: req.clientIp,
          ...(bearer ? { authorization: bearer } : {}),
        },
        () => next(),
      ),
    );
  };
}
