import { status as GrpcStatus } from '@grpc/grpc-js';
import pg from 'pg';
import { isDependencyOutage } from './dependency-errors';
import { toGrpcStatus } from './grpc-errors';
import { testPostgresUrl } from './testing';

describe('isDependencyOutage', () => {
  it('knows a refused connection to a real port, and a wrapped one', async () => {
    // A port nothing listens on: pg's real error for a server that is down.
    const client = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' });
    const err = await client.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isDependencyOutage(err)).toBe(true);
    expect(isDependencyOutage(new Error('Failed query: select 1', { cause: err }))).toBe(true);
    expect(toGrpcStatus(err).code).toBe(GrpcStatus.ABORTED); // the "unavailable" kind: HTTP 503
  });

  it('knows a session the server ended (57P01), and not a constraint violation', async () => {
    const victim = new pg.Client({ connectionString: testPostgresUrl() });
    const killer = new pg.Client({ connectionString: testPostgresUrl() });
    await victim.connect();
    await killer.connect();
    const errors: unknown[] = [];
    victim.on('error', (e) => errors.push(e));
    try {
      const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const pending = victim.query('SELECT pg_sleep(5)').then(
        () => undefined,
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, 100));
      await killer.query('SELECT pg_terminate_backend($1)', [pid]);
      const err = await pending;
      expect(isDependencyOutage(err)).toBe(true);
      const dup = await killer.query('SELECT 1/0').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isDependencyOutage(dup)).toBe(false);
      expect(toGrpcStatus(dup).code).toBe(GrpcStatus.INTERNAL);
    } finally {
      await killer.end();
      await victim.end().catch(() => undefined);
    }
  });

  it('knows a failover the connection has not seen, and a NATS connection that closed, by their shapes', () => {
    const readOnly = Object.assign(new Error('cannot execute INSERT in a read-only transaction'), {
      code: '25006',
    });
    expect(isDependencyOutage(readOnly)).toBe(true);
    class ClosedConnectionError extends Error {
      override name = 'ClosedConnectionError';
    }
    expect(isDependencyOutage(new ClosedConnectionError('closed connection'))).toBe(true);
    // ioredis's ReplyError from a Redis master a Sentinel failover demoted.
    class ReplyError extends Error {
      override name = 'ReplyError';
    }
    expect(isDependencyOutage(new ReplyError("READONLY You can't write against a read only replica."))).toBe(
      true,
    );
    expect(
      isDependencyOutage(new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value')),
    ).toBe(false);
  });

  it('is false for programming errors', () => {
    // Using a client after releasing it is a bug, not an outage.
    expect(isDependencyOutage(new Error('Client was closed and is not queryable'))).toBe(false);
    expect(isDependencyOutage(new TypeError('x is undefined'))).toBe(false);
    expect(isDependencyOutage('a string')).toBe(false);
    expect(isDependencyOutage(undefined)).toBe(false);
  });
});
