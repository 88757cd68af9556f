import path from 'node:path';

/** The repository root (this file runs from tools/mesh/dist). */
export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/**
 * The nine services, in start order: the gateway last, so that the services it calls are already
 * starting when it does. Each is `node services/<name>/dist/main.js`.
 */
export const SERVICES = [
  'identity',
  'vault-crypto',
  'policy',
  'signer',
  'approvals',
  'audit',
  'webhook-dispatcher',
  'billing',
  'gateway',
] as const;

/** One of the nine services. */
export type ServiceName = (typeof SERVICES)[number];

/**
 * The gRPC and metrics port each service listens on by default (the defaults of its config.ts),
 * which dev mode uses: gRPC 50050..50058 and metrics 9460..9468, the gateway first.
 */
export const DEFAULT_PORTS: Readonly<Record<ServiceName, { grpc: number; metrics: number }>> = {
  gateway: { grpc: 50050, metrics: 9460 },
  identity: { grpc: 50051, metrics: 9461 },
  'vault-crypto': { grpc: 50052, metrics: 9462 },
  policy: { grpc: 50053, metrics: 9463 },
  signer: { grpc: 50054, metrics: 9464 },
  approvals: { grpc: 50055, metrics: 9465 },
  audit: { grpc: 50056, metrics: 9466 },
  'webhook-dispatcher': { grpc: 50057, metrics: 9467 },
  billing: { grpc: 50058, metrics: 9468 },
};

/** The variable that tells the other services where a service's gRPC server is: `VAULT_CRYPTO_ADDR`. */
export function addrVar(service: ServiceName): string {
  return `${service.toUpperCase().replace(/-/g, '_')}_ADDR`;
}

/** The entry point of a service: `<root>/services/<name>/dist/main.js`. */
export function serviceMain(service: ServiceName, root: string = REPO_ROOT): string {
  return path.join(root, 'services', service, 'dist', 'main.js');
}
