import { createRequire } from 'node:module';
import { ConfigError, type ConfigOf, type ConfigShape, env, loadConfig } from './config.js';
import {
  type Database,
  type ServiceRoleOptions,
  createDatabase,
  createPool,
  migrateSchema,
  provisionServiceRole,
  serviceRoleName,
} from './db.js';
import { registerPoolMetrics } from './db-metrics.js';
import { isDependencyOutage } from './dependency-errors.js';
import { GrpcServer, grpcServerConfigShape } from './grpc-server.js';
import { DependencyHealth, ServingStatus } from './health.js';
import { createLogger, describeError, type Logger } from './logger.js';
import { MeshTls, MeshTlsError } from './mesh-tls.js';
import { createMetrics, startMetricsServer, type Metrics } from './metrics.js';
import { parseResourceAttributes } from './otel-resource.js';
import { initTracing } from './tracing.js';
import type pg from 'pg';

/** Variables every service reads; `defaults` gives each service its own ports for dev mode. */
export function baseConfigShape(defaults: { grpcPort: number; metricsPort: number }) {
  return {
    LOG_LEVEL: env
      .oneOf('Minimum log level.', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
      .default('info'),
    GRPC_HOST: env.string('Address the gRPC server binds (health and internal RPCs).').default('0.0.0.0'),
    GRPC_PORT: env.port('Port of the gRPC server.').default(defaults.grpcPort),
    ...grpcServerConfigShape,
    GRPC_TLS_CA_FILE: env.string(
      'PEM file of the mesh CA: gRPC peers (clients and servers) must present a certificate it issued. Re-read when it changes.',
    ),
    GRPC_TLS_CERT_FILE: env.string(
      'PEM file of this service’s mesh certificate (URI SAN `spiffe://custos/<service>`), presented to gRPC peers both ways. Re-read when it changes.',
    ),
    GRPC_TLS_KEY_FILE: env.string(
      'PEM file of the private key of GRPC_TLS_CERT_FILE. Re-read when it changes.',
    ),
    METRICS_HOST: env.string('Address the Prometheus /metrics server binds.').default('0.0.0.0'),
    METRICS_PORT: env
      .port('Port of the Prometheus /metrics server; 0 picks a free port.')
      .default(defaults.metricsPort),
    OTEL_EXPORTER_OTLP_ENDPOINT: env
      .url('Base URL of an OTLP/HTTP trace collector (spans go to <url>/v1/traces); unset disables export.', [
        'http',
        'https',
      ])
      .optional(),
    OTEL_BSP_SCHEDULE_DELAY: env.int('Milliseconds between batched span exports.', 10, 60000).default(2000),
    OTEL_SERVICE_NAME: env
      .string(
        'Names this process in traces (`service.name`); unset: the service’s own name (e.g. `vault-crypto`).',
      )
      .optional(),
    OTEL_RESOURCE_ATTRIBUTES: env
      .string(
        'Extra resource attributes of this process’s traces, the OpenTelemetry way: comma-separated `key=value` pairs, percent-decoded (e.g. `deployment.environment=prod,k8s.pod.name=$(POD_NAME)`). A `service.name` here applies unless OTEL_SERVICE_NAME is set; a malformed list is ignored whole, with a warning.',
      )
      .optional(),
    SHUTDOWN_GRACE_MS: env
      .int('How long calls in flight may finish after SIGTERM, in milliseconds.', 0, 120000)
      .default(10000),
  };
}

/** Variables of a service that owns a Postgres schema. */
export const databaseConfigShape = {
  DATABASE_URL: env.url(
    'Postgres connection URL, as this service\u2019s own login role (`custos_<service>`, made by its migrations), never the schema owner.',
    ['postgres', 'postgresql'],
  ),
  DATABASE_POOL_MAX: env.int('Maximum Postgres connections of this process.', 1, 500).default(10),
};

/** Variables of a service's `migrate` entry (the migration Job, the mesh launcher), run as the schema owner. */
export const migrationConfigShape = {
  DATABASE_URL: env.url(
    'Postgres connection URL of the schema owner, which applies the migrations and provisions the service role.',
    ['postgres', 'postgresql'],
  ),
  DATABASE_SERVICE_ROLE: env
    .string('The login role the service connects as (default `custos_<service>`, dashes as underscores).')
    .optional(),
  DATABASE_SERVICE_PASSWORD: env
    .string(
      'Password the service role logs in with, set on every run; unset leaves it as it is (trust auth).',
    )
    .optional(),
};

/** What a service's start function receives. */
export interface Runtime<C> {
  name: string;
  config: C;
  logger: Logger;
  metrics: Metrics;
  grpc: GrpcServer;
  /** This process's mesh certificates: gRPC clients to peers are made with them (createGrpcClient). */
  tls: MeshTls;
  /** Registers a step run at shutdown; steps run in reverse order of registration. */
  onShutdown(name: string, step: () => Promise<void>): void;
  /** The dependencies (Postgres, NATS, Redis) this process probes and reports in its health. */
  dependencies: DependencyHealth;
}

/** Options of runService. */
export interface ServiceDefinitionOptions<S extends ConfigShape> {
  name: string;
  configShape: S;
  start(rt: Runtime<ConfigOf<S>>): Promise<void>;
}

const version: string = (() => {
  try {
    return (createRequire(__filename)('../package.json') as { version: string }).version;
  } catch {
    return '0.0.0';
  }
})();

/**
 * The mesh certificates of service `name` from GRPC_TLS_*; a file that is missing or unusable, or
 * a certificate naming another service, stops the start with one line (exit 78).
 */
function loadMeshTls(name: string, c: ConfigOf<ReturnType<typeof baseConfigShape>>, logger: Logger): MeshTls {
  try {
    const tls = new MeshTls(
      { caFile: c.GRPC_TLS_CA_FILE, certFile: c.GRPC_TLS_CERT_FILE, keyFile: c.GRPC_TLS_KEY_FILE },
      { logger },
    );
    if (tls.identity !== name) {
      throw new MeshTlsError(`GRPC_TLS_CERT_FILE is the certificate of '${tls.identity}', not of '${name}'`);
    }
    logger.info(
      { identity: tls.identity, serial: tls.certificate.serialNumber, not_after: tls.certificate.notAfter },
      'mesh certificate loaded',
    );
    return tls;
  } catch (err) {
    if (!(err instanceof MeshTlsError)) throw err;
    process.stderr.write(`custos-${name}: invalid configuration: ${err.message}\n`);
    process.exit(78);
  }
}

/**
 * Starts one service: configuration (failing fast with one line that names the bad variables),
 * tracing, logging, metrics, the gRPC server with health, then the service's own start function.
 * SIGTERM/SIGINT mark it NOT_SERVING, drain the gRPC server and run the shutdown steps in reverse.
 */
export function runService<S extends ConfigShape>(opts: ServiceDefinitionOptions<S>): void {
  let config: ConfigOf<S>;
  try {
    config = loadConfig(opts.configShape);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`custos-${opts.name}: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  // Spans are created by the kit's own wrappers (no require hooks), so tracing can follow config.
  const base = config as unknown as ConfigOf<ReturnType<typeof baseConfigShape>>;
  const resource = parseResourceAttributes(base.OTEL_RESOURCE_ATTRIBUTES);
  const tracing = initTracing({
    serviceName: opts.name,
    serviceVersion: version,
    otlpEndpoint: base.OTEL_EXPORTER_OTLP_ENDPOINT,
    scheduledDelayMillis: base.OTEL_BSP_SCHEDULE_DELAY,
    otelServiceName: base.OTEL_SERVICE_NAME,
    ...('attributes' in resource ? { resourceAttributes: resource.attributes } : {}),
  });
  const logger = createLogger({ service: opts.name, level: base.LOG_LEVEL });
  if ('error' in resource)
    logger.warn({ reason: resource.error }, 'OTEL_RESOURCE_ATTRIBUTES is malformed and was ignored');
  const metrics = createMetrics(opts.name);
  const tls = loadMeshTls(opts.name, base, logger);
  const grpc = new GrpcServer(logger, metrics, tls, { maxConnectionAgeMs: base.GRPC_MAX_CONNECTION_AGE_MS });
  const steps: Array<{ name: string; step: () => Promise<void> }> = [];
  // Registered first, so it runs last: the certificate watcher outlives every client and server.
  steps.push({ name: 'mesh-tls', step: async () => tls.close() });
  let stopping = false;

  const dependencies = new DependencyHealth(grpc.health, logger);
  const stop = async (exitCode: number) => {
    if (stopping) return;
    stopping = true;
    // A step can wait on a dependency that is gone (a pool connecting to a stopped Postgres): the
    // process still ends, 10 s after the grace of the calls in flight.
    setTimeout(() => {
      logger.warn('shutdown steps did not finish in time; exiting');
      logger.flush?.();
      process.exit(exitCode);
    }, base.SHUTDOWN_GRACE_MS + 10_000).unref();
    dependencies.stop();
    logger.info('shutting down');
    await grpc.shutdown(base.SHUTDOWN_GRACE_MS).catch(() => undefined);
    for (const { name, step } of steps.reverse()) {
      await step().catch((err: unknown) =>
        logger.warn({ err: describeError(err), step: name }, 'shutdown step failed'),
      );
    }
    await tracing.shutdown().catch(() => undefined);
    logger.info('stopped');
    logger.flush?.();
    process.exit(exitCode);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));

  const rt: Runtime<ConfigOf<S>> = {
    name: opts.name,
    config,
    logger,
    metrics,
    grpc,
    tls,
    onShutdown: (name, step) => steps.push({ name, step }),
    dependencies,
  };

  void (async () => {
    try {
      const metricsServer = await startMetricsServer(metrics.registry, base.METRICS_HOST, base.METRICS_PORT, {
        ready: () => grpc.health.allServing(),
      });
      steps.push({ name: 'metrics', step: metricsServer.close });
      await opts.start(rt);
      const port = await grpc.listen(base.GRPC_HOST, base.GRPC_PORT);
      grpc.health.setAll(ServingStatus.SERVING);
      dependencies.start();
      logger.info({ grpc_port: port, metrics_port: metricsServer.port, version }, 'ready');
    } catch (err) {
      if (err instanceof ConfigError) {
        // A setting that only the service itself can check (e.g. a key's length) is still one line.
        process.stderr.write(`custos-${opts.name}: ${err.message}\n`);
        await stop(78);
        return;
      }
      logger.fatal({ err: describeError(err) }, 'start failed');
      await stop(1);
    }
  })();
}

/** What a service's `migrate` entry declares: its schema, its migrations and its role's exceptions. */
export interface MigrationOptions {
  name: string;
  schema: string;
  migrationsFolder: string;
  /** Tables whose privileges differ from the default read/write (see provisionServiceRole). */
  tablePrivileges?: ServiceRoleOptions['tablePrivileges'];
}

/**
 * Entry point of `migrate` (the Kubernetes migration Job, the mesh launcher): applies one
 * service's migrations as the schema owner, then provisions the service's own login role
 * (DATABASE_SERVICE_ROLE) with privileges on this schema only; exits 0, or prints one line and
 * exits non-zero.
 */
export function runMigrations(opts: MigrationOptions): void {
  let config: ConfigOf<typeof migrationConfigShape>;
  try {
    config = loadConfig(migrationConfigShape);
  } catch (err) {
    process.stderr.write(
      `custos-${opts.name} migrate: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(78);
  }
  const logger = createLogger({ service: `${opts.name}-migrate` });
  const role = config.DATABASE_SERVICE_ROLE ?? serviceRoleName(opts.name);
  const pool = createPool(config.DATABASE_URL, 1, logger, `custos-${opts.name}-migrate`);
  (async () => {
    await migrateSchema(pool, opts);
    await provisionServiceRole(pool, {
      schema: opts.schema,
      role,
      ...(config.DATABASE_SERVICE_PASSWORD !== undefined
        ? { password: config.DATABASE_SERVICE_PASSWORD }
        : {}),
      ...(opts.tablePrivileges ? { tablePrivileges: opts.tablePrivileges } : {}),
    });
  })().then(
    async () => {
      logger.info({ schema: opts.schema, role }, 'migrations applied, service role provisioned');
      await pool.end();
    },
    async (err: unknown) => {
      logger.fatal({ err: describeError(err) }, 'migration failed');
      await pool.end().catch(() => undefined);
      process.exitCode = 1;
    },
  );
}

/**
 * Opens the service's Postgres pool (as its own role; migrations are not its business) and closes
 * it at shutdown.
 */
export async function openDatabase(
  rt: Runtime<ConfigOf<typeof databaseConfigShape>>,
): Promise<{ pool: pg.Pool; db: Database }> {
  const pool = createPool(
    rt.config.DATABASE_URL,
    rt.config.DATABASE_POOL_MAX,
    rt.logger,
    `custos-${rt.name}`,
  );
  rt.onShutdown('postgres', () => pool.end());
  registerPoolMetrics(rt.metrics.registry, pool, 'main');
  // Postgres not there yet (a cluster restarting, a failover) is waited for, not a reason to exit:
  // the process is alive (/livez) and not ready (/readyz) meanwhile.
  for (let delay = 500; ; delay = Math.min(delay * 2, 10_000)) {
    try {
      await pool.query('SELECT 1');
      break;
    } catch (err) {
      if (!isDependencyOutage(err)) throw err;
      rt.logger.warn(
        { err: describeError(err), retry_in_ms: delay },
        'Postgres is unreachable; waiting for it',
      );
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  // The probe has a connection of its own: on the service's pool it would queue behind the requests
  // of a busy service and report a healthy Postgres as down.
  const probe = createPool(rt.config.DATABASE_URL, 1, rt.logger, `custos-${rt.name}-health`);
  rt.onShutdown('postgres-probe', () => probe.end());
  registerPoolMetrics(rt.metrics.registry, probe, 'health');
  rt.dependencies.add({
    name: 'postgres',
    required: true,
    check: async () => (await probe.query('SELECT 1')).rowCount === 1,
  });
  return { pool, db: createDatabase(pool) };
}
