import {
  type CallOptions,
  type ChannelCredentials,
  type Client,
  type ClientOptions,
  type ClientUnaryCall,
  InterceptingCall,
  type Interceptor,
  type Metadata,
  Metadata as MetadataCtor,
  type ServiceError,
  credentials as grpcCredentials,
} from '@grpc/grpc-js';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { fromGrpcError } from './grpc-errors.js';
import { currentRequestContext } from './request-context.js';
import { injectTraceContext, tracer } from './tracing.js';

/** Options of a gRPC client to a peer service. */
export interface GrpcClientOptions {
  /** Deadline applied to every call that sets none, in milliseconds. */
  deadlineMs?: number;
  /** Attempts for a call that fails with UNAVAILABLE (bounded, with backoff), including the first. */
  maxAttempts?: number;
  credentials?: ChannelCredentials;
}

type ClientCtor<C> = new (
  address: string,
  credentials: ChannelCredentials,
  options?: Partial<ClientOptions>,
) => C;

/** Interceptor that sets a default deadline, opens a client span and forwards trace, request id, caller JWT and client IP. */
export function propagationInterceptor(deadlineMs: number): Interceptor {
  return (options, nextCall) => {
    const opts = options.deadline ? options : { ...options, deadline: Date.now() + deadlineMs };
    const path = opts.method_definition.path;
    const span = tracer().startSpan(path, {
      kind: SpanKind.CLIENT,
      attributes: { 'rpc.system': 'grpc', 'rpc.method': path },
    });
    const spanContext = trace.setSpan(context.active(), span);
    const request = currentRequestContext();
    return new InterceptingCall(nextCall(opts), {
      start(metadata, _listener, next) {
        const carrier: Record<string, string> = {};
        injectTraceContext(carrier, spanContext);
        for (const [k, v] of Object.entries(carrier)) metadata.set(k, v);
        if (request) {
          metadata.set('x-request-id', request.requestId);
          if (request.authorization && metadata.get('authorization').length === 0) {
            metadata.set('authorization', request.authorization);
          }
          if (request.clientIp) metadata.set('x-custos-client-ip', request.clientIp);
        }
        // A partial listener: grpc-js fills in the other callbacks and passes `nextStatus`.
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            span.setAttribute('rpc.grpc.status_code', status.code);
            if (status.code !== 0) span.setStatus({ code: SpanStatusCode.ERROR });
            span.end();
            nextStatus(status);
          },
        });
      },
    });
  };
}

/** Creates a client for a peer service at `host:port` with deadlines, bounded retries and propagation. */
export function createGrpcClient<C extends Client>(
  Ctor: ClientCtor<C>,
  address: string,
  opts: GrpcClientOptions = {},
): C {
  const maxAttempts = Math.min(Math.max(opts.maxAttempts ?? 3, 1), 5);
  const serviceConfig = {
    methodConfig: [
      {
        name: [{}],
        retryPolicy: {
          maxAttempts: Math.max(maxAttempts, 2),
          initialBackoff: '0.05s',
          maxBackoff: '1s',
          backoffMultiplier: 2,
          retryableStatusCodes: maxAttempts > 1 ? ['UNAVAILABLE'] : [],
        },
      },
    ],
  };
  return new Ctor(address, opts.credentials ?? grpcCredentials.createInsecure(), {
    interceptors: [propagationInterceptor(opts.deadlineMs ?? 5000)],
    'grpc.enable_retries': 1,
    'grpc.service_config': JSON.stringify(serviceConfig),
    'grpc.keepalive_time_ms': 30000,
  });
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => ClientUnaryCall;

/** Calls a unary RPC and resolves its response; failures become the CustosError the peer raised. */
export function callUnary<Req, Res>(
  client: Client,
  method: UnaryMethod<Req, Res>,
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions> = {},
): Promise<Res> {
  return new Promise((resolve, reject) => {
    method.call(client, request, metadata, options, (err, res) => {
      if (err) reject(fromGrpcError(err));
      else resolve(res);
    });
  });
}

/**
 * `call(method, request)` for one client: the request context (caller JWT, request id, trace)
 * travels through the interceptor, so route handlers need nothing else.
 */
export function unaryCaller(client: Client) {
  return <Req, Res>(
    method: UnaryMethod<Req, Res>,
    request: Req,
    options: Partial<CallOptions> = {},
  ): Promise<Res> => callUnary(client, method, request, new MetadataCtor(), options);
}
