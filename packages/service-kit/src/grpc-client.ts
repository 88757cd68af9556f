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
  type StatusObject,
  status as GrpcStatus,
} from '@grpc/grpc-js';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { fromGrpcError, toGrpcStatus } from './grpc-errors.js';
import type { MeshService, MeshTls } from './mesh-tls.js';
import { currentRequestContext } from './request-context.js';
import { injectTraceContext, tracer } from './tracing.js';

/** Options of a gRPC client to a peer service. */
export interface GrpcClientOptions {
  /** This process's mesh certificates: the client presents its own and checks the server's. */
  tls: MeshTls;
  /** The service at the address: its certificate must name `spiffe://custos/<peer>`. */
  peer: MeshService;
  /**
   * Forward the user's JWT and client IP from the request context (the gateway's clients only;
   * other services' calls carry what the callee needs as request fields). Default false.
   */
  forwardCaller?: boolean;
  /**
   * With `forwardCaller`: the credential this peer gets instead of the user's own `authorization`
   * (the gateway asks identity for a token whose audience names the peer). Resolves the token to
   * send as `Bearer <token>`, or undefined to send none; a rejection fails the call with its error.
   */
  callerToken?: CallerTokenSource;
  /** Deadline applied to every call that sets none, in milliseconds. */
  deadlineMs?: number;
  /** Attempts for a call that fails with UNAVAILABLE (bounded, with backoff), including the first. */
  maxAttempts?: number;
}

/**
 * The token a peer gets for the caller whose `authorization` header the gateway holds; `cached`,
 * when given, answers synchronously with a token already at hand (or undefined), so the call
 * starts at once without waiting on a promise and a deadline timer.
 */
export type CallerTokenSource = ((
  peer: MeshService,
  userAuthorization: string,
) => Promise<string | undefined>) & {
  cached?: (peer: MeshService, userAuthorization: string) => string | undefined;
};

type ClientCtor<C> = new (
  address: string,
  credentials: ChannelCredentials,
  options?: Partial<ClientOptions>,
) => C;

/**
 * Interceptor that sets a default deadline, opens a client span and forwards trace and request id,
 * and with `forwardCaller` the client IP and the caller's credential: the user's `authorization`
 * as it is, or with `callerToken` the token it resolves for `peer` (the call starts once it has).
 */
export function propagationInterceptor(
  deadlineMs: number,
  forwardCaller = false,
  callerToken?: { peer: MeshService; source: CallerTokenSource },
): Interceptor {
  return (options, nextCall) => {
    const opts = options.deadline ? options : { ...options, deadline: Date.now() + deadlineMs };
    const path = opts.method_definition.path;
    const span = tracer().startSpan(path, {
      kind: SpanKind.CLIENT,
      attributes: { 'rpc.system': 'grpc', 'rpc.method': path },
    });
    const spanContext = trace.setSpan(context.active(), span);
    const request = currentRequestContext();
    const d = opts.deadline;
    const deadlineAt = d instanceof Date ? d.getTime() : Number(d);
    let settled = false;
    let abandon: (() => void) | undefined;
    const call: InterceptingCall = new InterceptingCall(nextCall(opts), {
      start(metadata, listener, next) {
        const carrier: Record<string, string> = {};
        injectTraceContext(carrier, spanContext);
        for (const [k, v] of Object.entries(carrier)) metadata.set(k, v);
        let userAuthorization: string | undefined;
        if (request) {
          metadata.set('x-request-id', request.requestId);
          if (forwardCaller && request.authorization && metadata.get('authorization').length === 0) {
            userAuthorization = request.authorization;
          }
          if (forwardCaller && request.clientIp) metadata.set('x-custos-client-ip', request.clientIp);
        }
        // A partial listener: grpc-js fills in the other callbacks and passes `nextStatus`.
        const proceed = () =>
          next(metadata, {
            onReceiveStatus(status, nextStatus) {
              span.setAttribute('rpc.grpc.status_code', status.code);
              if (status.code !== 0) span.setStatus({ code: SpanStatusCode.ERROR });
              span.end();
              nextStatus(status);
            },
          });
        if (!userAuthorization) return proceed();
        if (!callerToken) {
          metadata.set('authorization', userAuthorization);
          return proceed();
        }
        const ready = callerToken.source.cached?.(callerToken.peer, userAuthorization);
        if (ready) {
          metadata.set('authorization', `Bearer ${ready}`);
          return proceed();
        }
        // grpc-js holds the request message and half-close until `next` runs. Until then the
        // underlying call has no listener, so its own deadline or a cancel would go unheard: this
        // interceptor ends the call itself when the deadline passes or the caller cancels first.
        const fail = (failure: StatusObject) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          span.setAttribute('rpc.grpc.status_code', failure.code);
          span.setStatus({ code: SpanStatusCode.ERROR });
          span.end();
          call.cancelWithStatus(GrpcStatus.CANCELLED, 'no credential for the peer');
          listener.onReceiveStatus(failure);
        };
        const expired = (): StatusObject => ({
          code: GrpcStatus.DEADLINE_EXCEEDED,
          details: 'deadline exceeded while getting a credential for the peer',
          metadata: new MetadataCtor(),
        });
        const timer = setTimeout(() => fail(expired()), Math.max(0, deadlineAt - Date.now()));
        abandon = () =>
          fail({ code: GrpcStatus.CANCELLED, details: 'cancelled', metadata: new MetadataCtor() });
        callerToken.source(callerToken.peer, userAuthorization).then(
          (token) => {
            if (settled) return;
            if (Date.now() >= deadlineAt) return fail(expired());
            settled = true;
            clearTimeout(timer);
            if (token) metadata.set('authorization', `Bearer ${token}`);
            proceed();
          },
          (err: unknown) => {
            // The call never starts (the peer sees nothing): its caller gets the error, details
            // included, and the unstarted call is ended.
            const status = toGrpcStatus(err);
            fail({
              code: status.code ?? GrpcStatus.UNAVAILABLE,
              details: status.details ?? 'unavailable',
              metadata: status.metadata ?? new MetadataCtor(),
            });
          },
        );
      },
      cancel(next) {
        // Before the call started, the caller's cancel must reach its listener from here.
        if (abandon && !settled) abandon();
        else next();
      },
    });
    return call;
  };
}

/**
 * Creates a client for the peer service at `address` (`host:port` or `dns:///host:port`, both
 * resolved through DNS; see `env.address`) over mTLS, with deadlines, bounded retries, round-robin
 * over the addresses the target resolves to, and propagation. There is no plaintext mode.
 */
export function createGrpcClient<C extends Client>(
  Ctor: ClientCtor<C>,
  address: string,
  opts: GrpcClientOptions,
): C {
  const maxAttempts = Math.min(Math.max(opts.maxAttempts ?? 3, 1), 5);
  // grpc-js refuses a retry policy with no retryable codes: one attempt means no policy at all.
  const retryPolicy = {
    maxAttempts,
    initialBackoff: '0.05s',
    maxBackoff: '1s',
    backoffMultiplier: 2,
    retryableStatusCodes: ['UNAVAILABLE'],
  };
  const serviceConfig = {
    // Calls spread over every address the target resolves to (a headless Service's pod IPs with a
    // dns:/// target); with one address it is the same as pick_first. New pods are found when the
    // resolver runs again: at reconnects, which the servers' GRPC_MAX_CONNECTION_AGE_MS forces.
    loadBalancingConfig: [{ round_robin: {} }],
    methodConfig: [{ name: [{}], ...(maxAttempts > 1 ? { retryPolicy } : {}) }],
  };
  return new Ctor(address, opts.tls.channelCredentials(opts.peer), {
    interceptors: [
      propagationInterceptor(
        opts.deadlineMs ?? 5000,
        opts.forwardCaller ?? false,
        opts.callerToken && { peer: opts.peer, source: opts.callerToken },
      ),
    ],
    // SNI names the service (a DNS SAN of its certificate) rather than an address, which TLS
    // forbids; the identity check itself reads the URI SAN and ignores host names.
    'grpc.ssl_target_name_override': opts.peer,
    'grpc.enable_retries': 1,
    'grpc.service_config': JSON.stringify(serviceConfig),
    // grpc-js otherwise asks DNS for a TXT record of the target's name and, when it holds
    // `grpc_config=…`, uses that service config instead of the one above: whoever can publish a
    // DNS record could then change this client's retries, timeouts and balancing.
    'grpc.service_config_disable_resolution': 1,
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
 * `call(method, request)` for one client: the request context (request id, trace, and on the
 * gateway's clients the user's JWT) travels through the interceptor, so route handlers need nothing else.
 */
export function unaryCaller(client: Client) {
  return <Req, Res>(
    method: UnaryMethod<Req, Res>,
    request: Req,
    options: Partial<CallOptions> = {},
  ): Promise<Res> => callUnary(client, method, request, new MetadataCtor(), options);
}
