import { type EventName, SUBSCRIBABLE_FAMILIES } from './catalogue.js';

/**
 * What one service does on NATS: the events its outbox relay publishes, whether it writes audit
 * records, and its durable pull consumers. This table is the one source of every service's NATS
 * permissions (the mesh launcher's nats-server config and the chart's
 * `files/nats-permissions.json` are rendered from it); a test checks it against the code.
 */
export interface NatsServiceUse {
  /** Events it writes with writeEvent (never `audit.recorded`, see `audits`). */
  readonly publishes: readonly EventName[];
  /** It writes audit records: they go out on `<prefix>.audit.recorded.<service>`. */
  readonly audits: boolean;
  /** Its durable consumers: name, and subject filter below the prefix. */
  readonly consumers: readonly { readonly durable: string; readonly filter: string }[];
  /** Durables of earlier releases whose position it may read, to start its own after it. */
  readonly takesOverFrom?: readonly string[];
}

/** The single fan-out consumer of earlier releases, which read every subject of the stream. */
export const LEGACY_FANOUT_DURABLE = 'webhook-fanout';

/**
 * webhook-dispatcher's fan-out consumers: one per family of subscribable events, filtered to
 * `<prefix>.<family>.>`, so that it never receives what it has no use for (every org's audit
 * records, share mail requests with their links and addresses). The durable name is also the
 * consumer's inbox key.
 */
export const FANOUT_CONSUMERS: readonly { durable: string; filter: string }[] = SUBSCRIBABLE_FAMILIES.map(
  (family) => ({ durable: `${LEGACY_FANOUT_DURABLE}-${family}`, filter: `${family}.>` }),
);

/** Every service that connects to NATS (the gateway does not), with what it does there. */
export const NATS_SERVICES = {
  identity: {
    publishes: [],
    audits: true,
    consumers: [
      { durable: 'identity-share-mail', filter: 'share.email_requested' },
      { durable: 'identity-approval-mail', filter: 'approval.created' },
    ],
  },
  'vault-crypto': { publishes: ['share.email_requested'], audits: true, consumers: [] },
  policy: { publishes: ['policy.created', 'policy.updated', 'policy.deleted'], audits: true, consumers: [] },
  signer: {
    publishes: ['signing_key.rotated', 'agent.transaction.broadcast', 'agent.transaction.signed'],
    audits: true,
    consumers: [],
  },
  approvals: {
    publishes: [
      'approval.created',
      'approval.decided',
      'pending_approval.created',
      'pending_approval.approved',
      'pending_approval.rejected',
      'pending_approval.executed',
      'pending_approval.expired',
    ],
    audits: true,
    consumers: [],
  },
  // audit appends the records it makes itself (RecordEvent) directly, never through NATS.
  audit: {
    publishes: [],
    audits: false,
    consumers: [{ durable: 'audit-chain', filter: 'audit.recorded.>' }],
  },
  'webhook-dispatcher': {
    publishes: [],
    audits: true,
    consumers: FANOUT_CONSUMERS,
    takesOverFrom: [LEGACY_FANOUT_DURABLE],
  },
  billing: { publishes: [], audits: true, consumers: [] },
} as const satisfies Record<string, NatsServiceUse>;

/** A service that connects to NATS. */
export type NatsService = keyof typeof NATS_SERVICES;

/** The services that connect to NATS, in a stable order. */
export const NATS_SERVICE_NAMES = Object.keys(NATS_SERVICES) as NatsService[];

/** True when `name` is a service with NATS rights (e.g. the producer token of an audit subject). */
export function isNatsService(name: string): name is NatsService {
  return Object.prototype.hasOwnProperty.call(NATS_SERVICES, name);
}

/** Subjects a NATS user may publish to and subscribe to (nats-server `permissions`). */
export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

/**
 * The inbox prefix a service's connection uses for replies (`inboxPrefix`): its own, so that it
 * may subscribe only to its own replies and never snoop on another service's.
 */
export function inboxPrefixOf(service: string): string {
  return `_INBOX_${service}`;
}

/**
 * The subject filter of a consumer below `prefix`. Also the
 * last part of the `$JS.API.CONSUMER.CREATE.<stream>.<durable>.<filter>` subject, so granting
 * that subject pins what the consumer may read.
 */
export function consumerFilter(prefix: string, filter: string): string {
  return `${prefix}.${filter}`;
}

/**
 * The permissions of `service` for the stream and subject prefix of a deployment: publish its own
 * events and `audit.recorded.<service>`; the JetStream API calls its link and consumers make
 * (account info, info and create of the one stream, info/create/delete/next of its own durables,
 * acks of its own deliveries); subscribe to its own inbox. Nothing else: no stream update, delete or
 * purge, no other service's events or consumers, no direct reads of the stream.
 */
export function natsPermissions(
  service: NatsService,
  where: { prefix: string; stream: string },
): NatsPermissions {
  const use: NatsServiceUse = NATS_SERVICES[service];
  const { prefix, stream } = where;
  const publish = [
    ...use.publishes.map((e) => `${prefix}.${e}`),
    ...(use.audits ? [`${prefix}.audit.recorded.${service}`] : []),
    '$JS.API.INFO',
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.CREATE.${stream}`,
  ];
  for (const d of use.takesOverFrom ?? []) publish.push(`$JS.API.CONSUMER.INFO.${stream}.${d}`);
  for (const c of use.consumers) {
    publish.push(
      `$JS.API.CONSUMER.INFO.${stream}.${c.durable}`,
      `$JS.API.CONSUMER.CREATE.${stream}.${c.durable}.${consumerFilter(prefix, c.filter)}`,
      // Only to make it again when an earlier release left it with another filter (consumer.ts).
      `$JS.API.CONSUMER.DELETE.${stream}.${c.durable}`,
      `$JS.API.CONSUMER.MSG.NEXT.${stream}.${c.durable}`,
      `$JS.ACK.${stream}.${c.durable}.>`,
    );
  }
  return { publish, subscribe: [`${inboxPrefixOf(service)}.>`] };
}

/** The placeholders of the chart's copy of the permissions (`files/nats-permissions.json`). */
export const CHART_PLACEHOLDERS = { prefix: '{prefix}', stream: '{stream}' } as const;

/**
 * Every service's permissions with `{prefix}` and `{stream}` left as placeholders: the content of
 * `charts/custos/files/nats-permissions.json`, which the chart renders into an authorization block.
 */
export function chartNatsPermissions(): Record<NatsService, NatsPermissions> {
  const out = {} as Record<NatsService, NatsPermissions>;
  for (const s of NATS_SERVICE_NAMES) out[s] = natsPermissions(s, CHART_PLACEHOLDERS);
  return out;
}

/** The JSON text of `files/nats-permissions.json` (two-space indent, final newline). */
export function chartNatsPermissionsJson(): string {
  return `${JSON.stringify(chartNatsPermissions(), null, 2)}\n`;
}

/** One user of a generated nats-server config. */
export interface NatsServerUser {
  user: string;
  password: string;
  /** Omitted: may publish and subscribe to anything (a test or operator user, never a service). */
  permissions?: NatsPermissions;
}

/** What a generated nats-server config needs. */
export interface NatsServerConfigOptions {
  host: string;
  port: number;
  /** JetStream store folder. */
  storeDir: string;
  users: readonly NatsServerUser[];
  /** Extra top-level lines (e.g. `http_port: 8222`). */
  extra?: readonly string[];
}

/**
 * A nats-server configuration: JetStream with its store in `storeDir`, listening on host:port,
 * and an authorization block with one user per entry (a connection without credentials is
 * refused). Strings are written as JSON strings, which nats-server's parser reads verbatim.
 */
export function natsServerConfig(o: NatsServerConfigOptions): string {
  const q = (s: string) => JSON.stringify(s);
  const list = (xs: readonly string[]) => `[${xs.map(q).join(', ')}]`;
  const users = o.users.map((u) => {
    const perms = u.permissions
      ? `, permissions: { publish: { allow: ${list(u.permissions.publish)} }, subscribe: { allow: ${list(u.permissions.subscribe)} } }`
      : '';
    return `    { user: ${q(u.user)}, password: ${q(u.password)}${perms} }`;
  });
  return [
    `listen: ${q(`${o.host}:${o.port}`)}`,
    `jetstream { store_dir: ${q(o.storeDir)} }`,
    ...(o.extra ?? []),
    'authorization {',
    '  users: [',
    users.join('\n'),
    '  ]',
    '}',
    '',
  ].join('\n');
}

/**
 * The users of a mesh's nats-server: one per service with its permissions for `where`, each with
 * its password from `passwords` (user name = service name).
 */
export function serviceNatsUsers(
  where: { prefix: string; stream: string },
  passwords: Readonly<Record<NatsService, string>>,
): NatsServerUser[] {
  return NATS_SERVICE_NAMES.map((s) => ({
    user: s,
    password: passwords[s],
    permissions: natsPermissions(s, where),
  }));
}
