import http from 'node:http';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The Prometheus registry of one service, with the metrics the kit records itself. */
export interface Metrics {
  registry: Registry;
  grpcHandled: Counter<'method' | 'grpc_code'>;
  grpcDuration: Histogram<'method'>;
  /**
   * Bearer-token revocation checks against Redis by outcome: `passed`, `revoked`, or `failed`
   * (Redis down, timed out, or its revocation list not restored yet: the request was refused 503).
   */
  tokenRevocationChecks: Counter<'outcome'>;
}

/** The outcomes of a revocation check, as `custos_token_revocation_checks_total` labels them. */
export const REVOCATION_OUTCOMES = ['passed', 'revoked', 'failed'] as const;

/** Creates the registry with process metrics and the kit's gRPC metrics, labelled with the service. */
export function createMetrics(service: string): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  const tokenRevocationChecks = new Counter({
    name: 'custos_token_revocation_checks_total',
    help: 'Bearer-token revocation checks against Redis, by outcome (passed, revoked, failed: Redis could not answer).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  // Every outcome exported from the start, so a rate over it exists before the first failure.
  for (const outcome of REVOCATION_OUTCOMES) tokenRevocationChecks.inc({ outcome }, 0);
  return {
    tokenRevocationChecks,
    registry,
    grpcHandled: new Counter({
      name: 'custos_grpc_server_handled_total',
      help: 'gRPC calls completed, by method and status code',
      labelNames: ['method', 'grpc_code'],
      registers: [registry],
    }),
    grpcDuration: new Histogram({
      name: 'custos_grpc_server_handling_seconds',
      help: 'gRPC handling time',
      labelNames: ['method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}

/**
 * Serves `GET /metrics`, and for Kubernetes probes (the gRPC port wants a mesh certificate)
 * `GET /livez` (the process answers) and `GET /readyz` (200 when `ready()`, else 503), on its own
 * port; returns the bound port and a close function.
 */
export async function startMetricsServer(
  registry: Registry,
  host: string,
  port: number,
  probes: { ready: () => boolean } = { ready: () => true },
): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/livez') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (req.method === 'GET' && req.url === '/readyz') {
      const ready = probes.ready();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ok' : 'not serving');
      return;
    }
    if (req.method === 'GET' && req.url === '/metrics') {
      registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(body);
        },
        () => {
          res.writeHead(500).end();
        },
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address();
  return {
    port: typeof addr === 'object' && addr ? addr.port : port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
