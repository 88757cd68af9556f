import {
  type ConfigOf,
  type ConfigShape,
  type Database,
  type Runtime,
  type databaseConfigShape,
  openDatabase,
  runService,
} from '@custos/service-kit';
import type pg from 'pg';
import type { natsConfigShape } from './config.js';
import { NatsLink } from './nats.js';
import { inboxPrefixOf } from './nats-permissions.js';
import { OutboxRelay } from './relay.js';

/** The event plumbing of one service: its NATS link and outbox relay. */
export interface ServiceEvents {
  link: NatsLink;
  relay: OutboxRelay;
  stream: string;
  subjectPrefix: string;
}

/**
 * Connects to NATS in the background and starts the outbox relay of `schema`; both stop at
 * shutdown (the relay before the pool, which was registered earlier).
 */
export function startEvents(
  rt: Runtime<ConfigOf<typeof natsConfigShape>>,
  opts: { pool: pg.Pool; schema: string },
): ServiceEvents {
  const c = rt.config;
  const link = new NatsLink(
    c.NATS_URL.split(',').map((s) => s.trim()),
    {
      stream: c.NATS_STREAM,
      subjectPrefix: c.NATS_SUBJECT_PREFIX,
      maxAgeMs: c.NATS_STREAM_MAX_AGE_HOURS * 60 * 60 * 1000,
      replicas: c.NATS_STREAM_REPLICAS,
      maxBytes: c.NATS_STREAM_MAX_BYTES,
    },
    rt.logger,
    `custos-${rt.name}`,
    {
      ...(c.NATS_USER !== undefined ? { user: c.NATS_USER } : {}),
      ...(c.NATS_PASSWORD !== undefined ? { password: c.NATS_PASSWORD } : {}),
      ...(c.NATS_TLS_CA_FILE !== undefined ? { tlsCaFile: c.NATS_TLS_CA_FILE } : {}),
      inboxPrefix: inboxPrefixOf(rt.name),
    },
  );
  link.start();
  // Reported, not required: the outbox keeps what services commit until NATS is back.
  rt.dependencies.add({
    name: 'nats',
    required: false,
    check: async () => (await link.ready()) !== undefined,
  });
  const relay = new OutboxRelay({
    pool: opts.pool,
    schema: opts.schema,
    link,
    subjectPrefix: c.NATS_SUBJECT_PREFIX,
    producer: rt.name,
    logger: rt.logger,
    // Off: every audit record goes out alone (readable by an audit service from before batching).
    ...(c.NATS_BATCH_AUDIT_RECORDS ? {} : { batchedEvents: [] }),
  });
  relay.start();
  rt.onShutdown('nats', () => link.close());
  rt.onShutdown('outbox-relay', () => relay.stop());
  return { link, relay, stream: rt.config.NATS_STREAM, subjectPrefix: rt.config.NATS_SUBJECT_PREFIX };
}

/** Options of runDataService. */
export interface DataServiceOptions<S extends ConfigShape> {
  name: string;
  /** The Postgres schema this service owns. */
  schema: string;
  configShape: S;
  /** Wires the service's own RPCs and consumers once its database and event link are up. */
  start?(
    rt: Runtime<ConfigOf<S>>,
    deps: { pool: pg.Pool; db: Database; events: ServiceEvents },
  ): Promise<void>;
}

/**
 * Runs a service that owns a Postgres schema and publishes events: opens the pool (as the service's
 * own role; its `migrate` entry applied the migrations beforehand), starts NATS and the outbox
 * relay, then the service's own wiring. Shutdown order: gRPC server, relay, NATS, pool.
 */
export function runDataService<S extends ConfigShape & typeof databaseConfigShape & typeof natsConfigShape>(
  opts: DataServiceOptions<S>,
): void {
  runService({
    name: opts.name,
    configShape: opts.configShape,
    async start(rt) {
      // S extends both shapes, but zod's generic inference cannot show it; the casts only narrow.
      const dbRt = rt as unknown as Runtime<ConfigOf<typeof databaseConfigShape>>;
      const natsRt = rt as unknown as Runtime<ConfigOf<typeof natsConfigShape>>;
      const { pool, db } = await openDatabase(dbRt);
      const events = startEvents(natsRt, { pool, schema: opts.schema });
      await opts.start?.(rt, { pool, db, events });
    },
  });
}
