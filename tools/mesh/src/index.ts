// The one mesh launcher: the dev launcher (tools/dev), the end-to-end tests (tools/e2e) and the
// benchmark (tools/bench) start the nine services through this module.
export { REPO_ROOT, SERVICES, DEFAULT_PORTS, addrVar, serviceMain, type ServiceName } from './services';
export { type MeshPorts, defaultPorts, freeMeshPort, freePorts } from './ports';
export {
  type MeshProfile,
  type MeshKeys,
  type MeshEnvOptions,
  PROFILE_DEFAULTS,
  meshEnv,
  serviceEnv,
  randomMeshKeys,
  uniqueNatsNames,
} from './env';
export { ManagedProcess, type ManagedProcessOptions, type ProcessExit } from './process';
export {
  MeshSupervisor,
  type MeshSupervisorOptions,
  type RestartPolicy,
  type ServiceExitEvent,
  DEFAULT_RESTART_POLICY,
  restartDelay,
} from './supervisor';
export { type HealthCheck, checkHealth, waitForHealth, notServingFrom } from './health';
export { type LaunchMeshOptions, type LaunchedMesh, launchMesh } from './launch';
export { ANVIL_CHAIN_ID, type MeshAnvil, anvilBinary, anvilReadyAt, startMeshAnvil } from './anvil';
export {
  type MeshCerts,
  type MeshCertFiles,
  type MakeMeshCertsOptions,
  makeMeshCerts,
  meshCertFiles,
} from './certs';
export {
  type MeshDatabase,
  type MigrateMeshOptions,
  DATABASE_SERVICES,
  databaseRole,
  derivedRolePassword,
  migrateMain,
  migrateMesh,
  roleUrl,
} from './migrate';
export {
  type MeshInfra,
  type MeshInfraOptions,
  type MeshNatsAccess,
  type ServerControl,
  startMeshInfra,
} from './mesh-infra';
export {
  type MeshNats,
  type MeshNatsConfig,
  type MeshNatsOptions,
  type NatsLogin,
  NATS_TEST_USER,
  natsInfoAt,
  natsServerBinary,
  prepareMeshNats,
  startMeshNats,
} from './nats-server';
export {
  type MeshRedis,
  type MeshRedisAccess,
  type MeshRedisConfig,
  type MeshRedisOptions,
  type RedisLogin,
  prepareMeshRedis,
  redisReadyAt,
  redisServerBinary,
  startMeshRedis,
} from './redis-server';
