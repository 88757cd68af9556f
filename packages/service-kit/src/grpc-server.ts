import { randomUUID } from 'node:crypto';
import {
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  type handleUnaryCall,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { HealthService } from '@custos/proto/grpc/health/v1/health';
import { toGrpcStatus } from './grpc-errors.js';
import { HealthRegistry, ServingStatus } from './health.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import { runWithRequestContext } from './request-context.js';
import { extractTraceContext, tracer } from './tracing.js';

type AsyncUnary<H> =
  H extends handleUnaryCall<infer Req, infer Res>
    ? (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>
    : H;

/** A service implementation whose unary handlers are async functions returning the response. */
export type AsyncService<S> = { [K in keyof S]: AsyncUnary<S[K]> };

function firstString(v: unknown): string | undefined {
  if (Array.isArray(v)) return firstString(v[0]);
  if (typeof v === 'string') return v;
  if (v instanceof Buffer) return v.toString('utf8');
  return undefined;
}

/** The gRPC server of one service: tracing, request context, metrics and error mapping on every call. */
export class GrpcServer {
  readonly server = new Server({ 'grpc.max_receive_message_length': 4 * 1024 * 1024 });
  readonly health = new HealthRegistry();

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.addRaw(HealthService, this.health.implementation());
  }

  /** Registers a service whose unary handlers are async functions; throws are mapped to gRPC statuses. */
  add<S extends UntypedServiceImplementation>(definition: ServiceDefinition<S>, impl: AsyncService<S>): void {
    const raw: Record<string, unknown> = {};
    for (const [key, method] of Object.entries(definition)) {
      const fn = (impl as Record<string, unknown>)[key];
      if (typeof fn !== 'function') throw new Error(`handler ${key} is missing`);
      raw[key] =
        method.requestStream || method.responseStream
          ? fn
          : (call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => {
              (fn as (r: unknown, c: unknown) => Promise<unknown>)(call.request, call).then(
                (res) => cb(null, res),
                (err: unknown) => cb(toGrpcStatus(err, this.logger)),
              );
            };
    }
    this.addRaw(definition, raw as S);
  }

  /** Registers a service with grpc-js style handlers, adding tracing, context and metrics to unary ones. */
  addRaw<S extends UntypedServiceImplementation>(definition: ServiceDefinition<S>, impl: S): void {
    const wrapped: Record<string, unknown> = {};
    let serviceName: string | undefined;
    for (const [key, method] of Object.entries(definition)) {
      serviceName ??= method.path.split('/')[1];
      const handler = impl[key];
      wrapped[key] =
        method.requestStream || method.responseStream
          ? handler
          : this.instrument(method.path, handler as handleUnaryCall<unknown, unknown>);
    }
    if (!serviceName) return; // a contract with no RPCs yet: nothing to serve
    this.server.addService(definition, wrapped as S);
    if (serviceName !== 'grpc.health.v1.Health') this.health.set(serviceName, ServingStatus.NOT_SERVING);
  }

  private instrument(
    path: string,
    handler: handleUnaryCall<unknown, unknown>,
  ): handleUnaryCall<unknown, unknown> {
    return (call, callback) => {
      const md = call.metadata.getMap();
      const parent = extractTraceContext({
        traceparent: firstString(md['traceparent']),
        tracestate: firstString(md['tracestate']),
      });
      const span = tracer().startSpan(
        path,
        { kind: SpanKind.SERVER, attributes: { 'rpc.system': 'grpc', 'rpc.method': path } },
        parent,
      );
      const authorization = firstString(md['authorization']);
      const clientIp = firstString(md['x-custos-client-ip']);
      const requestContext = {
        requestId: firstString(md['x-request-id']) ?? randomUUID(),
        ...(authorization ? { authorization } : {}),
        ...(clientIp ? { clientIp } : {}),
      };
      const stopTimer = this.metrics.grpcDuration.startTimer({ method: path });
      const done: sendUnaryData<unknown> = (err, value, trailer, flags) => {
        const code = err?.code ?? 0;
        span.setAttribute('rpc.grpc.status_code', code);
        if (code !== 0) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
        stopTimer();
        this.metrics.grpcHandled.inc({ method: path, grpc_code: String(code) });
        callback(err, value, trailer, flags);
      };
      context.with(trace.setSpan(parent, span), () =>
        runWithRequestContext(requestContext, () => {
          try {
            handler(call, done);
          } catch (err) {
            done(toGrpcStatus(err, this.logger));
          }
        }),
      );
    };
  }

  /** Binds and starts serving; returns the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(
        `${host.includes(':') ? `[${host}]` : host}:${port}`,
        ServerCredentials.createInsecure(),
        (err, bound) => (err ? reject(err) : resolve(bound)),
      );
    });
  }

  /** Marks everything NOT_SERVING, lets calls in flight finish for up to `graceMs`, then closes. */
  async shutdown(graceMs: number): Promise<void> {
    this.health.setAll(ServingStatus.NOT_SERVING);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
