// What the chart must encode, written down independently of values.yaml so that a changed default
// is caught: the nine services, their gRPC ports, the peers each one is given (<PEER>_ADDR), and
// the callers each one's NetworkPolicy admits (docs/deployment.md, "NetworkPolicy matrix").

/** The nine services and their GRPC_PORT. */
export const GRPC_PORTS = {
  gateway: 50050,
  identity: 50051,
  'vault-crypto': 50052,
  policy: 50053,
  signer: 50054,
  approvals: 50055,
  audit: 50056,
  'webhook-dispatcher': 50057,
  billing: 50058,
} as const;

export type ServiceName = keyof typeof GRPC_PORTS;
export const SERVICES = Object.keys(GRPC_PORTS) as ServiceName[];
/** The eight services that own a Postgres schema and ship dist/migrate.js. */
export const DATABASE_SERVICES = SERVICES.filter((s) => s !== 'gateway');

export const METRICS_PORT = 9464;
export const GATEWAY_HTTP_PORT = 8080;

/** Who may call each service's gRPC port. */
export const ALLOWED_CALLERS: Record<ServiceName, ServiceName[]> = {
  gateway: [],
  identity: [
    'gateway',
    'vault-crypto',
    'policy',
    'signer',
    'approvals',
    'audit',
    'webhook-dispatcher',
    'billing',
  ],
  'vault-crypto': ['gateway', 'signer', 'identity'],
  policy: ['gateway', 'vault-crypto', 'identity', 'signer'],
  signer: ['gateway'],
  approvals: ['gateway', 'signer'],
  audit: ['gateway'],
  'webhook-dispatcher': ['gateway'],
  billing: ['gateway', 'identity', 'vault-crypto'],
};

/** The peer address variables each service gets. */
export const PEER_ADDRS: Record<ServiceName, string[]> = {
  gateway: [
    'IDENTITY_ADDR',
    'VAULT_CRYPTO_ADDR',
    'POLICY_ADDR',
    'SIGNER_ADDR',
    'APPROVALS_ADDR',
    'AUDIT_ADDR',
    'WEBHOOK_DISPATCHER_ADDR',
    'BILLING_ADDR',
  ],
  identity: ['POLICY_ADDR', 'BILLING_ADDR', 'VAULT_CRYPTO_ADDR'],
  'vault-crypto': ['IDENTITY_ADDR', 'POLICY_ADDR', 'BILLING_ADDR'],
  policy: ['IDENTITY_ADDR'],
  signer: ['IDENTITY_ADDR', 'VAULT_CRYPTO_ADDR', 'POLICY_ADDR', 'APPROVALS_ADDR'],
  approvals: ['IDENTITY_ADDR'],
  audit: ['IDENTITY_ADDR'],
  'webhook-dispatcher': ['IDENTITY_ADDR'],
  billing: ['IDENTITY_ADDR'],
};

/** The service an _ADDR variable points at. */
export function serviceOfAddr(variable: string): ServiceName {
  const service = variable
    .replace(/_ADDR$/, '')
    .toLowerCase()
    .replace(/_/g, '-');
  if (!(service in GRPC_PORTS)) throw new Error(`${variable} names no service`);
  return service as ServiceName;
}

/** The Postgres login role of each service with a database (postgres.serviceCredentials.<s>.role). */
export const DATABASE_ROLES: Record<Exclude<ServiceName, 'gateway'>, string> = {
  identity: 'custos_identity',
  'vault-crypto': 'custos_vault_crypto',
  policy: 'custos_policy',
  signer: 'custos_signer',
  approvals: 'custos_approvals',
  audit: 'custos_audit',
  'webhook-dispatcher': 'custos_webhook_dispatcher',
  billing: 'custos_billing',
};

/** The services that use NATS (the outbox and consumers of every service with a database). */
export const NATS_SERVICES = DATABASE_SERVICES;
/** Each service's NATS user (nats.users.<s>.user). */
export const NATS_USERS: Record<string, string> = DATABASE_ROLES;

/** The services that use Redis: the gateway's rate limits, identity's revocations and their readers (every service that verifies tokens). */
export const REDIS_SERVICES: ServiceName[] = [
  'gateway',
  'identity',
  'vault-crypto',
  'policy',
  'signer',
  'approvals',
  'audit',
  'webhook-dispatcher',
  'billing',
];

/** Each service's Redis ACL user (redis.users.<s>.user): the name of its Postgres role. */
export const REDIS_USERS: Record<string, string> = {
  ...DATABASE_ROLES,
  gateway: 'custos_gateway',
};

/**
 * The cloud metadata and host addresses no internet rule may reach, among them Azure's
 * wireserver 168.63.129.16, a public address outside every private range.
 */
export const METADATA_CIDRS = [
  '169.254.169.254/32',
  'fd00:ec2::254/128',
  '100.100.100.200/32',
  '168.63.129.16/32',
];
