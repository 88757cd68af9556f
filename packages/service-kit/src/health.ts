import type { ServerUnaryCall, ServerWritableStream, sendUnaryData } from '@grpc/grpc-js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  type HealthCheckRequest,
  type HealthCheckResponse,
  HealthCheckResponse_ServingStatus as ServingStatus,
  type HealthServer,
} from '@custos/proto/grpc/health/v1/health';

export { ServingStatus };

/**
 * The grpc.health.v1 state of one process. The empty service name is the whole server; each
 * registered gRPC service also has its own entry.
 */
export class HealthRegistry {
  private readonly statuses = new Map<string, ServingStatus>([['', ServingStatus.NOT_SERVING]]);
  private readonly watchers = new Set<{
    service: string;
    call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>;
  }>();

  /** Sets one service's status and notifies watchers. */
  set(service: string, status: ServingStatus): void {
    this.statuses.set(service, status);
    for (const w of this.watchers) if (w.service === service) w.call.write({ status });
  }

  /** Sets every known service (and the server entry) to `status`. */
  setAll(status: ServingStatus): void {
    for (const service of [...this.statuses.keys()]) this.set(service, status);
  }

  /** Whether the server and every registered service are SERVING (the readiness probe). */
  allServing(): boolean {
    return [...this.statuses.values()].every((s) => s === ServingStatus.SERVING);
  }

  /** The status of one service, or undefined when unknown. */
  get(service: string): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  /** The grpc-js implementation of grpc.health.v1.Health backed by this registry. */
  implementation(): HealthServer {
    return {
      check: (
        call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
        cb: sendUnaryData<HealthCheckResponse>,
      ) => {
        const status = this.statuses.get(call.request.service);
        if (status === undefined) cb({ code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
        else cb(null, { status });
      },
      watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const entry = { service: call.request.service, call };
        this.watchers.add(entry);
        call.write({ status: this.statuses.get(call.request.service) ?? ServingStatus.SERVICE_UNKNOWN });
        call.on('cancelled', () => this.watchers.delete(entry));
        call.on('close', () => this.watchers.delete(entry));
      },
    };
  }
}
