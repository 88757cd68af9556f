import type { ServerUnaryCall, ServerWritableStream, sendUnaryData } from '@grpc/grpc-js';
import { describeError } from './logger.js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  type HealthCheckRequest,
  type HealthCheckResponse,
  HealthCheckResponse_ServingStatus as ServingStatus,
  type HealthServer,
} from '@custos/proto/grpc/health/v1/health';

export { ServingStatus };

/** The health entry of a dependency (`custos.dependency.postgres`, ...): not a gRPC service name. */
export const DEPENDENCY_HEALTH_PREFIX = 'custos.dependency.';
/** SERVING while every dependency of the process (required or not) answers its probe. */
export const DEPENDENCIES_HEALTH_ENTRY = 'custos.dependencies';

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
    if (this.statuses.get(service) === status) return;
    this.statuses.set(service, status);
    for (const w of this.watchers) if (w.service === service) w.call.write({ status });
  }

  /** Sets every known service (and the server entry) to `status`. */
  setAll(status: ServingStatus): void {
    for (const service of [...this.statuses.keys()]) this.set(service, status);
  }

  /**
   * Whether the server and every registered service are SERVING (the readiness probe). A dependency
   * that is down counts only when it is required (see DependencyHealth): it turns the server entry
   * NOT_SERVING.
   */
  allServing(): boolean {
    return [...this.statuses.entries()].every(
      ([name, s]) =>
        s === ServingStatus.SERVING ||
        name.startsWith(DEPENDENCY_HEALTH_PREFIX) ||
        name === DEPENDENCIES_HEALTH_ENTRY,
    );
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

/** One dependency DependencyHealth probes. */
export interface DependencyProbe {
  /** `postgres`, `nats`, `redis`. */
  name: string;
  /** Resolves true when the dependency answers; may throw or hang (bounded by the probe timeout). */
  check(): Promise<boolean>;
  /**
   * Whether the process cannot serve without it: a required dependency that is down turns the
   * server entry (and readiness) NOT_SERVING. Others are reported only (NATS: the outbox holds events
   * until it is back; Redis: its users fail closed or skip a cache on their own).
   */
  required: boolean;
}

/**
 * Probes a process's dependencies every `intervalMs` (two failures in a row count as down) and says
 * what it finds in the health registry:
 * `custos.dependency.<name>` SERVING or NOT_SERVING for each, `custos.dependencies` for all of them,
 * and the server entry NOT_SERVING while a required one is down (it comes back by itself). Each change
 * is logged once.
 */
export class DependencyHealth {
  private readonly probes: DependencyProbe[] = [];
  private readonly down = new Set<string>();
  /** Failed probes in a row per dependency: one is a blip (or a connection still being made at start). */
  private readonly failures = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private serving = false;
  private running = false;

  constructor(
    private readonly health: HealthRegistry,
    private readonly logger: { warn(o: object, m: string): void; info(o: object, m: string): void },
    private readonly intervalMs = 2000,
    private readonly timeoutMs = 1500,
  ) {}

  /** Adds a dependency (probed from the next round). */
  add(probe: DependencyProbe): void {
    // One probe per name: a second client of the same dependency (identity's own Redis beside its
    // verifier's) is the same dependency, and the first probe speaks for it.
    if (this.probes.some((p) => p.name === probe.name)) return;
    this.probes.push(probe);
    this.health.set(DEPENDENCY_HEALTH_PREFIX + probe.name, ServingStatus.SERVING);
    this.health.set(DEPENDENCIES_HEALTH_ENTRY, ServingStatus.SERVING);
  }

  /** The dependencies down at the last round. */
  get unavailable(): string[] {
    return [...this.down];
  }

  /** Starts probing, once the process serves (the runtime calls it after setAll(SERVING)). */
  start(): void {
    this.serving = true;
    if (this.timer) return;
    const tick = async () => {
      if (this.running) return;
      this.running = true;
      try {
        await this.round();
      } catch (err) {
        // A timer callback must never become an unhandled rejection (it would end the process).
        this.logger.warn({ err: describeError(err) }, 'dependency probe round failed');
      } finally {
        this.running = false;
      }
    };
    this.timer = setInterval(() => void tick(), this.intervalMs);
    this.timer.unref();
    void tick();
  }

  /** Stops probing (shutdown: the registry is set NOT_SERVING by its owner). */
  stop(): void {
    this.serving = false;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round of probes; exposed for tests. */
  async round(): Promise<void> {
    const results = await Promise.all(
      this.probes.map(async (p) => {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<boolean>((r) => {
          timer = setTimeout(() => r(false), this.timeoutMs);
        });
        const up = await Promise.race([
          Promise.resolve()
            .then(() => p.check())
            .catch(() => false),
          timeout,
        ]);
        clearTimeout(timer);
        return { p, up };
      }),
    );
    if (!this.serving) return;
    for (const { p, up: answered } of results) {
      const failed = answered ? 0 : (this.failures.get(p.name) ?? 0) + 1;
      this.failures.set(p.name, failed);
      const was = !this.down.has(p.name);
      // Down after two failed probes in a row; up again at the first answer.
      const up = answered || (was && failed < 2);
      if (up && !was) {
        this.down.delete(p.name);
        this.logger.info({ dependency: p.name }, `${p.name} is reachable again`);
      } else if (!up && was) {
        this.down.add(p.name);
        this.logger.warn(
          { dependency: p.name, required: p.required },
          p.required
            ? `${p.name} is unreachable: NOT_SERVING until it is back`
            : `${p.name} is unreachable (the service keeps serving)`,
        );
      }
      this.health.set(
        DEPENDENCY_HEALTH_PREFIX + p.name,
        up ? ServingStatus.SERVING : ServingStatus.NOT_SERVING,
      );
    }
    this.health.set(
      DEPENDENCIES_HEALTH_ENTRY,
      this.down.size === 0 ? ServingStatus.SERVING : ServingStatus.NOT_SERVING,
    );
    const requiredDown = this.probes.some((p) => p.required && this.down.has(p.name));
    this.health.set('', requiredDown ? ServingStatus.NOT_SERVING : ServingStatus.SERVING);
  }
}
