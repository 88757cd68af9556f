import type { RequestHandler } from 'express';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Logger } from '@custos/service-kit';

/**
 * The path as logs and trace spans may show it: a share link's segment after `/v1/share/` is a
 * credential's half (and was the whole credential once), so it is replaced. Query strings are
 * never logged at all (the link secret travels in `key`).
 */
export function loggablePath(path: string): string {
  return /^\/v1\/share\/[^/]/i.test(path) ? '/v1/share/[redacted]' : path;
}

/**
 * One log line and one metric sample per request: method, path (never the query string, which
 * may carry tokens), status, duration and client IP. Headers and bodies are never logged.
 */
export function accessLog(logger: Logger, registry: Registry): RequestHandler {
  const requests = new Counter({
    name: 'custos_http_requests_total',
    help: 'HTTP requests answered, by method, route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'custos_http_request_duration_seconds',
    help: 'HTTP request duration',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // The matched route pattern keeps label cardinality bounded; unmatched paths share one label.
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      requests.inc({ method: req.method, route, status: String(res.statusCode) });
      duration.observe({ method: req.method, route }, seconds);
      logger.info(
        {
          method: req.method,
          path: loggablePath(req.path),
          status: res.statusCode,
          duration_ms: Math.round(seconds * 1e6) / 1e3,
          client_ip: req.clientIp,
          request_id: req.requestId,
        },
        'request',
      );
    });
    next();
  };
}
