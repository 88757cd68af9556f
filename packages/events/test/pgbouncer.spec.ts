import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '@custos/service-kit';
import {
  createTestDatabase,
  freePort,
  testNatsServer,
  waitFor,
  type TestNatsServer,
} from '@custos/service-kit/testing';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { IdempotentConsumer, NatsLink, OutboxRelay, writeEvent, type EventEnvelope } from '../src';
import { DDL, SCHEMA, inbox, outbox } from './fixtures/schema';

// Why docs/dependencies.md supports PgBouncer in session mode and refuses transaction mode, shown on
// a real PgBouncer (Debian's package) in front of the test Postgres: the outbox relay elects its
// leader with a session advisory lock and sets a session statement_timeout.
const bouncerBin = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => fs.existsSync(p));
// tools/dev/ensure-infra.sh installs it, so a missing binary is a failure, not a skip.
if (!bouncerBin)
  throw new Error('pgbouncer is not installed: run tools/dev/ensure-infra.sh (Debian package pgbouncer)');
const describeWithBouncer = describe;
const logger = createLogger({ service: 'pgbouncer-test', level: 'silent' });

describeWithBouncer('PgBouncer in front of the services (docs/dependencies.md)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-pgbouncer-'));
  const bouncers: ChildProcess[] = [];
  const pools: pg.Pool[] = [];
  let database: Awaited<ReturnType<typeof createTestDatabase>>;

  /** Starts a PgBouncer in `mode` with `size` server connections; the URL of the test database through it. */
  async function bouncer(mode: 'session' | 'transaction', size: number): Promise<string> {
    const port = await freePort();
    const db = new URL(database.url);
    const ini = path.join(dir, `${mode}.ini`);
    fs.writeFileSync(path.join(dir, 'userlist.txt'), `"${db.username}" ""\n`);
    fs.writeFileSync(
      ini,
      [
        '[databases]',
        `${database.name} = host=${db.hostname} port=${db.port || 5432} dbname=${database.name}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${path.join(dir, 'userlist.txt')}`,
        `pool_mode = ${mode}`,
        `default_pool_size = ${size}`,
        'max_client_conn = 100',
        `logfile = ${path.join(dir, `${mode}.log`)}`,
        '',
      ].join('\n'),
    );
    // PgBouncer refuses to run as root.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      fs.chownSync(dir, uid, -1);
    }
    const p = asRoot
      ? spawn('runuser', ['-u', 'postgres', '--', bouncerBin!, ini], { stdio: 'ignore' })
      : spawn(bouncerBin!, [ini], { stdio: 'ignore' });
    bouncers.push(p);
    const url = `postgres://${db.username}@127.0.0.1:${port}/${database.name}`;
    await waitFor(async () => {
      const c = new pg.Client({ connectionString: url });
      try {
        await c.connect();
        await c.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await c.end().catch(() => undefined);
      }
    }, 10_000);
    return url;
  }
  const poolOf = (url: string, max = 4) => {
    const p = new pg.Pool({ connectionString: url, max });
    p.on('error', () => undefined);
    pools.push(p);
    return p;
  };

  beforeAll(async () => {
    database = await createTestDatabase('custos_events_pgbouncer');
    const direct = new pg.Pool({ connectionString: database.url, max: 1 });
    await direct.query(DDL);
    await direct.end();
  });

  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
    await Promise.all(
      bouncers.map(
        (b) =>
          new Promise<void>((resolve) => {
            if (b.exitCode !== null) return resolve();
            b.once('exit', () => resolve());
            b.kill('SIGTERM');
          }),
      ),
    );
    await database?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Two clients of two pools, as two replicas' relays would hold them, each trying for the leader lock. */
  async function twoLeaders(url: string) {
    const a = await poolOf(url, 1).connect();
    const b = await poolOf(url, 1).connect();
    const lock = `SELECT pg_try_advisory_lock(hashtext('custos.outbox.${SCHEMA}')) AS ok`;
    const first = (await a.query<{ ok: boolean }>(lock)).rows[0]!.ok;
    // The relay's leader sets this on its session (relay.ts).
    await a.query("SET statement_timeout = '30s'");
    const second = (await b.query<{ ok: boolean }>(lock)).rows[0]!.ok;
    const seenByOther = (await b.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!
      .statement_timeout;
    await a.query('SELECT pg_advisory_unlock_all()');
    await b.query('SELECT pg_advisory_unlock_all()');
    await a.query('RESET statement_timeout');
    a.release();
    b.release();
    return { first, second, seenByOther };
  }

  it("transaction mode: a second replica takes the same leader lock, and the leader's timeout leaks to it", async () => {
    // One server connection, as under load when the pool is busy: every client's statement runs on it.
    const url = await bouncer('transaction', 1);
    const r = await twoLeaders(url);
    expect(r.first).toBe(true);
    expect(r.second).toBe(true); // two relays would both lead
    expect(r.seenByOther).toBe('30s');
  });

  it('session mode: one leader, and session settings stay with their client', async () => {
    const url = await bouncer('session', 4);
    const r = await twoLeaders(url);
    expect(r).toEqual({ first: true, second: false, seenByOther: '0' });
  });

  describe('session mode carries the real outbox relay and consumer', () => {
    let nats: TestNatsServer;
    let link: NatsLink;
    const stream = `PGB_${randomUUID().slice(0, 8)}`;
    const prefix = `pgb.${stream.toLowerCase()}`;

    beforeAll(async () => {
      nats = await testNatsServer();
      await nats.start();
      link = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'pgbouncer-test');
      link.start();
      await waitFor(async () => (await link.ready()) !== undefined, 20_000);
    });
    afterAll(async () => {
      await link?.close();
      await nats?.stop();
    });

    it('two relays (two replicas) publish every event once, in order; a consumer applies them', async () => {
      const url = await bouncer('session', 8);
      const db = drizzle(poolOf(url));
      const relays = [0, 1].map(
        () =>
          new OutboxRelay({
            pool: poolOf(url),
            schema: SCHEMA,
            link,
            subjectPrefix: prefix,
            producer: 'pgbouncer-test',
            logger,
            pollMs: 50,
          }),
      );
      const handled: EventEnvelope[] = [];
      const consumer = new IdempotentConsumer({
        link,
        stream,
        durable: 'pgbouncer-test',
        filterSubject: `${prefix}.>`,
        db,
        inbox,
        logger,
        handler: async (event) => {
          handled.push(event);
        },
      });
      for (const r of relays) r.start();
      consumer.start();
      try {
        const ids: string[] = [];
        for (let i = 0; i < 30; i++)
          ids.push(
            await db.transaction((tx) =>
              writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'org-p', data: { i } }),
            ),
          );
        await waitFor(async () => handled.length >= ids.length, 20_000);
        expect(handled.map((e) => e.id)).toEqual(ids);
        const { jsm } = (await link.ready())!;
        expect((await jsm.streams.info(stream)).state.messages).toBe(ids.length);
      } finally {
        await consumer.stop();
        for (const r of relays) await r.stop();
      }
    });
  });
});
