import { randomUUID } from 'node:crypto';
import {
  Server,
  type ServerUnaryCall,
  status as GrpcStatus,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  type StatusObject,
  type handleUnaryCall,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { HealthService } from '@custos/proto/grpc/health/v1/health';
import { env } from './config.js';
import { toGrpcStatus } from './grpc-errors.js';
import { HealthRegistry, ServingStatus } from './health.js';
import type { Logger } from './logger.js';
import { callerIdentity, type MeshService, type MeshTls } from './mesh-tls.js';
import type { Metrics } from './metrics.js';
import { type RequestContext, runWithRequestContext } from './request-context.js';
import { extractTraceContext, tracer } from './tracing.js';

type AsyncUnary<H> =
  H extends handleUnaryCall<infer Req, infer Res>
    ? (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>
    : H;

/** A streaming server call, as far as the allow-list needs it. */
type StreamCall = Parameters<typeof callerIdentity>[0] & { emit(event: 'error', err: unknown): boolean };

/** A service implementation whose unary handlers are async functions returning the response. */
export type AsyncService<S> = { [K in keyof S]: AsyncUnary<S[K]> };

function firstString(v: unknown): string | undefined {
  if (Array.isArray(v)) return firstString(v[0]);
  if (typeof v === 'string') return v;
  if (v instanceof Buffer) return v.toString('utf8');
  return undefined;
}

/**
 * Who may call the RPCs of one gRPC service: the mesh identities (from the callers' client
 * certificates) allowed per method, by handler name, and `default` for every method not listed.
 * Anyone else gets PERMISSION_DENIED.
 */
export interface RpcAccess<S> {
  default: readonly MeshService[];
  methods?: { readonly [K in keyof S]?: readonly MeshService[] };
}

/** The identity whose `authorization` and `x-custos-client-ip` metadata a server believes. */
export const EDGE_IDENTITY: MeshService = 'gateway';

type Allowed = (caller: string | undefined) => boolean;

// The mesh identity of each HTTP/2 session's client certificate. A session is one TLS connection,
// whose peer certificate cannot change (HTTP/2 forbids renegotiation), so it is read once per
// connection: Node's getPeerCertificate builds the whole certificate (fingerprints included) on
// every call, tens of µs that every RPC paid. `null`: the connection has no mesh identity.
const sessionCallers = new WeakMap<object, string | null>();

/**
 * grpc-js's HTTP/2 session under a server call: the call wraps a chain of intercepting calls, the
 * innermost holding the stream. Not a public API, so anything unexpected yields undefined and the
 * caller reads the certificate the public way.
 */
function sessionOf(call: object): object | undefined {
  let c = (call as { call?: unknown }).call;
  for (let depth = 0; depth < 8 && c !== null && typeof c === 'object'; depth++) {
    const session = (c as { stream?: { session?: unknown } }).stream?.session;
    if (session !== null && typeof session === 'object') return session;
    c = (c as { nextCall?: unknown }).nextCall;
  }
  return undefined;
}

// The verified mesh identity of a call's peer, read from its connection's certificate once per connection.
function meshCallerOf(call: Parameters<typeof callerIdentity>[0]): string | undefined {
  const session = sessionOf(call);
  if (!session) return callerIdentity(call);
  const known = sessionCallers.get(session);
  if (known !== undefined) return known ?? undefined;
  const caller = callerIdentity(call);
  sessionCallers.set(session, caller ?? null);
  return caller;
}

/** The gRPC server's own variables (merged into every service's base configuration). */
export const grpcServerConfigShape = {
  GRPC_MAX_CONNECTION_AGE_MS: env
    .int(
      'Milliseconds after which the gRPC server asks a client connection to close (GOAWAY; calls in flight get 30 s more), so clients reconnect, re-resolve DNS and spread over new pods after a scale-out. 0 keeps connections open indefinitely.',
      0,
      86_400_000,
    )
    .default(300_000),
};

/** Connection settings of a GrpcServer. */
export interface GrpcServerOptions {
  /**
   * Close each client connection after this long (grpc-js adds up to ±10 % jitter), so clients
   * reconnect and re-resolve; 0 or unset: never.
   */
  maxConnectionAgeMs?: number;
  /**
   * How long calls in flight on a connection past its age may finish; default 30 s. A call still
   * running after that is cut, and the client's retry policy (UNAVAILABLE) runs it again, on this
   * or another server: harmless for today's RPCs, all under the clients' 5 s deadline, but an RPC
   * that may run longer than the grace (a stream, a long export) must either be safe to run twice
   * or be given a longer grace.
   */
  maxConnectionAgeGraceMs?: number;
}

/** grpc-js server options for `opts`: the message limit, and the connection age when set. */
export function grpcServerChannelOptions(opts: GrpcServerOptions = {}): Record<string, number> {
  const age = opts.maxConnectionAgeMs ?? 0;
  return {
    'grpc.max_receive_message_length': 4 * 1024 * 1024,
    ...(age > 0
      ? {
          'grpc.max_connection_age_ms': age,
          'grpc.max_connection_age_grace_ms': opts.maxConnectionAgeGraceMs ?? 30_000,
        }
      : {}),
  };
}

/**
 * The gRPC server of one service: mTLS (a client certificate from the mesh CA required), a caller
 * allow-list per RPC, tracing, request context, metrics and error mapping on every call.
 */
export class GrpcServer {
  readonly server: Server;
  readonly health = new HealthRegistry();

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly tls: MeshTls,
    options: GrpcServerOptions = {},
  ) {
    this.server = new Server(grpcServerChannelOptions(options));
    // Health answers any certificate from the mesh CA (the gateway and the launcher both ask).
    this.register(HealthService, this.health.implementation(), (caller) => caller !== undefined);
  }

  /**
   * Registers a service whose unary handlers are async functions (throws are mapped to gRPC
   * statuses), callable only by the identities `access` names.
   */
  add<S extends UntypedServiceImplementation>(
    definition: ServiceDefinition<S>,
    impl: AsyncService<S>,
    access: RpcAccess<S>,
  ): void {
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
    this.addRaw(definition, raw as S, access);
  }

  /**
   * Registers a service with grpc-js style handlers, callable only by the identities `access`
   * names; unary ones get tracing, context and metrics.
   */
  addRaw<S extends UntypedServiceImplementation>(
    definition: ServiceDefinition<S>,
    impl: S,
    access: RpcAccess<S>,
  ): void {
    const methods = (access.methods ?? {}) as Record<string, readonly string[] | undefined>;
    for (const name of Object.keys(methods)) {
      if (!(name in definition)) throw new Error(`access names ${name}, which the service does not have`);
    }
    this.register(definition, impl, (caller, key) => {
      const allowed = methods[key] ?? access.default;
      return caller !== undefined && allowed.includes(caller);
    });
  }

  private register<S extends UntypedServiceImplementation>(
    definition: ServiceDefinition<S>,
    impl: S,
    allowedFor: (caller: string | undefined, key: string) => boolean,
  ): void {
    const wrapped: Record<string, unknown> = {};
    let serviceName: string | undefined;
    for (const [key, method] of Object.entries(definition)) {
      serviceName ??= method.path.split('/')[1];
      const handler = impl[key];
      const allowed: Allowed = (caller) => allowedFor(caller, key);
      wrapped[key] =
        method.requestStream || method.responseStream
          ? this.guardStream(method.path, handler as (call: StreamCall) => void, allowed)
          : this.instrument(method.path, handler as handleUnaryCall<unknown, unknown>, allowed);
    }
    if (!serviceName) return; // a contract with no RPCs yet: nothing to serve
    this.server.addService(definition, wrapped as S);
    if (serviceName !== 'grpc.health.v1.Health') this.health.set(serviceName, ServingStatus.NOT_SERVING);
  }

  /** Logs a refused call (who, what; nothing the caller sent) and builds its status. */
  private refuse(path: string, caller: string | undefined): Partial<StatusObject> {
    this.logger.warn({ caller: caller ?? 'unknown', method: path }, 'gRPC call refused: caller not allowed');
    return {
      code: GrpcStatus.PERMISSION_DENIED,
      details: `${caller ? `'${caller}'` : 'a caller without a mesh identity'} may not call ${path}`,
    };
  }

  /** Streaming handlers (grpc.health.v1 Watch) get the allow-list only. */
  private guardStream(path: string, handler: (call: StreamCall) => void, allowed: Allowed) {
    return (call: StreamCall) => {
      const caller = meshCallerOf(call);
      if (!allowed(caller)) {
        call.emit('error', this.refuse(path, caller));
        return;
      }
      handler(call);
    };
  }

  private instrument(
    path: string,
    handler: handleUnaryCall<unknown, unknown>,
    allowed: Allowed,
  ): handleUnaryCall<unknown, unknown> {
    return (call, callback) => {
      const caller = meshCallerOf(call);
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
      // The caller's JWT and client IP are believed from the gateway only: another service could
      // replay a token it was handed or claim any address. Request id and trace travel from anyone.
      const edge = caller === EDGE_IDENTITY;
      const authorization = edge ? firstString(md['authorization']) : undefined;
      const clientIp = edge ? firstString(md['x-custos-client-ip']) : undefined;
      const requestContext: RequestContext = {
        requestId: firstString(md['x-request-id']) ?? randomUUID(),
        ...(caller ? { caller } : {}),
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
          if (!allowed(caller)) {
            done(this.refuse(path, caller));
            return;
          }
          try {
            handler(call, done);
          } catch (err) {
            done(toGrpcStatus(err, this.logger));
          }
        }),
      );
    };
  }

  /** Binds with mTLS and starts serving; returns the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(
        `${host.includes(':') ? `[${host}]` : host}:${port}`,
        this.tls.serverCredentials(),
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
