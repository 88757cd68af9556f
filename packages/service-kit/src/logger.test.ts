import { Writable } from 'node:stream';
import { createLogger, describeError } from './logger';
import { runWithRequestContext } from './request-context';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _e, cb) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: createLogger({ service: 'test', destination }) };
}

describe('createLogger', () => {
  it('redacts secret-bearing fields at any depth', () => {
    const { lines, logger } = capture();
    logger.info(
      {
        password: 'p1',
        nested: { api_key: 'k1', deeper: { Authorization: 'Bearer t1', list: [{ client_secret: 's1' }] } },
        user: 'alice',
      },
      'hello',
    );
    const text = JSON.stringify(lines);
    for (const secret of ['p1', 'k1', 'Bearer t1', 's1']) expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({ service: 'test', msg: 'hello', user: 'alice', level: 'info' });
  });

  it('tags lines with the request id of the current request', () => {
    const { lines, logger } = capture();
    runWithRequestContext({ requestId: 'req-1' }, () => logger.info('inside'));
    logger.info('outside');
    expect(lines[0]).toMatchObject({ request_id: 'req-1' });
    expect(lines[1]).not.toHaveProperty('request_id');
  });

  it('describes errors without stacks or database detail', () => {
    const err = new Error('boom');
    expect(describeError(err)).toEqual({ name: 'Error', message: 'boom' });
    class DatabaseError extends Error {
      code = '23505';
      detail = 'Key (email)=(alice@example.com) already exists.';
      constraint = 'users_email_key';
    }
    const d = describeError(new DatabaseError('duplicate key value violates unique constraint'));
    expect(JSON.stringify(d)).not.toContain('alice@example.com');
    expect(d).toMatchObject({ name: 'DatabaseError', pg_code: '23505', constraint: 'users_email_key' });
    const { lines, logger } = capture();
    logger.error({ err }, 'failed');
    expect(JSON.stringify(lines)).not.toContain('at ');
    // Call sites pass an already described error: it must survive the serializer intact.
    logger.error({ err: describeError(new Error('peer refused')) }, 'failed again');
    expect(lines[1]).toMatchObject({ err: { name: 'Error', message: 'peer refused' } });
  });

  it('never logs the SQL or parameters of a failed query', () => {
    class DrizzleQueryError extends Error {}
    class DatabaseError extends Error {
      code = '23505';
    }
    const wrapped = new DrizzleQueryError(
      'Failed query: insert into users (email) values ($1)\nparams: alice@example.com',
      {
        cause: new DatabaseError('duplicate key value violates unique constraint "users_email_key"'),
      },
    );
    const { lines, logger } = capture();
    logger.error({ err: describeError(wrapped) }, 'insert failed');
    const text = JSON.stringify(lines);
    expect(text).not.toContain('alice@example.com');
    expect(text).not.toContain('insert into');
    expect(lines[0]).toMatchObject({
      err: { name: 'QueryError', cause: { name: 'DatabaseError', pg_code: '23505' } },
    });
  });
});
