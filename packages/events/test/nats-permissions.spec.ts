import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import {
  type TestNatsServer,
  createTestDatabase,
  testNatsServer,
  waitFor,
} from '@custos/service-kit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import {
  type EventDelivery,
  type EventEnvelope,
  IdempotentConsumer,
  NATS_SERVICES,
  type NatsService,
  NatsLink,
  OutboxRelay,
  inboxPrefixOf,
  natsServerConfig,
  serviceNatsUsers,
  subjectFor,
  writeAudit,
  writeEvent,
} from '../src';
import { DDL, SCHEMA, inbox, outbox } from './fixtures/schema';

const logger = createLogger({ service: 'nats-permissions-test', level: 'silent' });

// A nats-server with the generated config (one user per service, as the mesh launcher and the
// chart run it), and services that connect as their own users through the real link, relay and
// consumer. A refused publish comes back to the client as a permissions error.
describe('NATS permissions per service (real nats-server)', () => {
  const stream = `PERM_${randomBytes(4).toString('hex').toUpperCase()}`;
  const prefix = `perm.${stream.toLowerCase()}`;
  const where = { prefix, stream };
  const passwords = Object.fromEntries(
    Object.keys(NATS_SERVICES).map((s) => [s, randomBytes(12).toString('hex')]),
  ) as Record<NatsService, string>;
  let url: string;
  let server: TestNatsServer;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  const cleanup: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await testNatsServer(undefined, ({ port, storeDir }) =>
      natsServerConfig({ host: '127.0.0.1', port, storeDir, users: serviceNatsUsers(where, passwords) }),
    );
    await server.start();
    url = server.url;
    database = await createTestDatabase('custos_events_perm');
    pool = new pg.Pool({ connectionString: database.url, max: 6 });
    // An idle client the teardown's DROP DATABASE … (FORCE) terminates must not fail the file.
    pool.on('error', () => undefined);
    await pool.query(DDL);
  });

  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
    await pool.end();
    await database.drop();
    await server.stop();
  });

  /** A raw connection as `service`, the way NatsLink connects. */
  async function connectAs(service: NatsService): Promise<NatsConnection> {
    const nc = await connect({
      servers: url,
      user: service,
      pass: passwords[service],
      inboxPrefix: inboxPrefixOf(service),
    });
    cleanup.push(() => nc.close());
    return nc;
  }

  /** The link of `service`, with its credentials. */
  function linkOf(service: NatsService): NatsLink {
    const link = new NatsLink([url], { stream, subjectPrefix: prefix }, logger, `test-${service}`, {
      user: service,
      password: passwords[service],
      inboxPrefix: inboxPrefixOf(service),
    });
    link.start();
    cleanup.push(() => link.close());
    return link;
  }

  /**
   * A consumer of `service` (its durable and filter from the table; of webhook-dispatcher's, the
   * first whose filter starts with `family`) that collects what it handles.
   */
  function consumerOf(service: 'audit' | 'identity' | 'webhook-dispatcher', family = '') {
    const got: Array<{ event: EventEnvelope; delivery: EventDelivery }> = [];
    const c = NATS_SERVICES[service].consumers.find((x) => x.filter.startsWith(family))!;
    const consumer = new IdempotentConsumer({
      link: linkOf(service),
      stream,
      durable: c.durable,
      filterSubject: `${prefix}.${c.filter}`,
      db: drizzle(pool),
      inbox,
      logger,
      handler: async (event, _tx, delivery) => {
        got.push({ event, delivery });
      },
    });
    consumer.start();
    cleanup.push(() => consumer.stop());
    return got;
  }

  /** Runs the outbox relay of `service` over the fixture schema until `ids` are published. */
  async function relayAs(service: NatsService, ids: string[]): Promise<void> {
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link: linkOf(service),
      subjectPrefix: prefix,
      producer: service,
      logger,
      pollMs: 50,
    });
    relay.start();
    try {
      await waitFor(async () => {
        const r = await pool.query(
          `SELECT count(*)::int AS n FROM ${SCHEMA}.outbox WHERE id = ANY($1::uuid[]) AND published_at IS NOT NULL`,
          [ids],
        );
        return r.rows[0].n === ids.length;
      }, 20000);
    } finally {
      await relay.stop();
    }
  }

  const envelope = (type: string) => {
    const id = randomUUID();
    return {
      id,
      body: JSON.stringify({ id, type, created_at: new Date().toISOString(), org_id: null, data: {} }),
    };
  };

  it('refuses a connection without credentials or with another service’s password', async () => {
    await expect(connect({ servers: url, timeout: 2000 })).rejects.toThrow(/Authorization Violation/i);
    await expect(
      connect({ servers: url, user: 'vault-crypto', pass: passwords.policy, timeout: 2000 }),
    ).rejects.toThrow(/Authorization Violation/i);
  });

  it('delivers what each service may publish to the consumers that read it', async () => {
    const audit = consumerOf('audit');
    const identity = consumerOf('identity');
    const fanout = consumerOf('webhook-dispatcher', 'policy.');
    const db = drizzle(pool);
    const orgId = randomUUID();
    const record = {
      orgId,
      actorType: 'system' as const,
      actorId: null,
      action: 'policy.created',
      resourceType: 'policy',
      resourceId: null,
    };
    // policy: its own event and its own audit record, through its relay.
    const policyIds = await db.transaction(async (tx) => [
      await writeEvent(tx, outbox, { name: 'policy.created', orgId, data: {} }),
      await writeAudit(tx, outbox, record),
    ]);
    await relayAs('policy', policyIds);
    // vault-crypto: the share mail request identity consumes.
    const shareIds = await db.transaction(async (tx) => [
      await writeEvent(tx, outbox, { name: 'share.email_requested', orgId, data: {} }),
    ]);
    await relayAs('vault-crypto', shareIds);

    await waitFor(async () => audit.some((g) => g.event.id === policyIds[1]), 20000);
    await waitFor(async () => identity.some((g) => g.event.id === shareIds[0]), 20000);
    await waitFor(async () => fanout.some((g) => g.event.id === policyIds[0]), 20000);
    expect(audit.find((g) => g.event.id === policyIds[1])!.delivery).toEqual({
      subject: `${prefix}.audit.recorded.policy`,
      producer: 'policy',
    });
    // Each consumer reads only its filter: the fan-out never sees the audit record or the share mail.
    expect(audit.map((g) => g.event.type)).toEqual(['audit.recorded']);
    expect(identity.map((g) => g.event.type)).toEqual(['share.email_requested']);
    expect(fanout.map((g) => g.event.type)).toEqual(['policy.created']);
  });

  it('refuses another service’s events and audit subject, and any stream change', async () => {
    const nc = await connectAs('webhook-dispatcher');
    const js = jetstream(nc, { timeout: 3000 });
    const own = envelope('audit.recorded');
    await expect(
      js.publish(subjectFor(prefix, 'audit.recorded', 'webhook-dispatcher'), own.body, { msgID: own.id }),
    ).resolves.toMatchObject({ stream });
    for (const subject of [
      subjectFor(prefix, 'audit.recorded', 'vault-crypto'),
      subjectFor(prefix, 'policy.created'),
      subjectFor(prefix, 'share.email_requested'),
    ]) {
      const e = envelope('x.y');
      await expect(js.publish(subject, e.body, { msgID: e.id })).rejects.toThrow(/Permissions Violation/);
    }
    const jsm = await jetstreamManager(nc, { timeout: 3000 });
    await expect(jsm.streams.delete(stream)).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.purge(stream)).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.update(stream, { max_msgs: 1 })).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.getMessage(stream, { seq: 1 })).rejects.toThrow(/Permissions Violation/);
    // The stream is still there and whole.
    const info = await jsm.streams.info(stream);
    expect(info.config.max_msgs).toBe(-1);
    expect(info.state.messages).toBeGreaterThan(0);
    // As the services create it: no rollup purges, no message deletes, no purges even for an admin.
    expect(info.config).toMatchObject({ allow_rollup_hdrs: false, deny_delete: true, deny_purge: true });
  });

  it('refuses reading through another service’s consumer, a wider filter, or another inbox', async () => {
    const nc = await connectAs('identity');
    const jsm = await jetstreamManager(nc, { timeout: 3000 });
    // identity may not read audit records: neither through audit's durable nor its own with a wider filter.
    await expect(jsm.consumers.info(stream, 'audit-chain')).rejects.toThrow(/Permissions Violation/);
    await expect(
      jsm.consumers.add(stream, { durable_name: 'identity-share-mail', filter_subject: `${prefix}.>` }),
    ).rejects.toThrow(/Permissions Violation/);
    await expect(
      jsm.consumers.add(stream, { durable_name: 'snoop', filter_subject: `${prefix}.audit.recorded.>` }),
    ).rejects.toThrow(/Permissions Violation/);
    // webhook-dispatcher, which reads the most, reads neither audit records nor share mail requests.
    const wh = await jetstreamManager(await connectAs('webhook-dispatcher'), { timeout: 3000 });
    for (const filter of [`${prefix}.>`, `${prefix}.audit.recorded.>`, `${prefix}.share.email_requested`]) {
      await expect(
        wh.consumers.add(stream, { durable_name: 'webhook-fanout-policy', filter_subject: filter }),
      ).rejects.toThrow(/Permissions Violation/);
      await expect(
        wh.consumers.add(stream, { durable_name: 'webhook-fanout', filter_subject: filter }),
      ).rejects.toThrow(/Permissions Violation/);
    }
    const violations: string[] = [];
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'error') violations.push(s.error.message);
    })();
    nc.subscribe(`${inboxPrefixOf('vault-crypto')}.>`);
    nc.subscribe(`${prefix}.>`);
    await waitFor(async () => violations.length >= 2, 5000);
    expect(violations.join('\n')).toMatch(/Subscription to "_INBOX_vault-crypto\.>"/);
    expect(violations.join('\n')).toMatch(
      new RegExp(`Subscription to "${prefix.replace(/\./g, '\\.')}\\.>"`),
    );
  });
});
