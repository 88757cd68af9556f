import { Redis } from 'ioredis';
import {
  ConfigError,
  createDatabase,
  createLogger,
  createPool,
  databaseConfigShape,
  describeError,
  env,
  loadConfig,
  redisConnectionConfigShape,
  redisConnectionOptions,
} from '@custos/service-kit';
import { retireCompromisedKey } from './tokens/retire-key-fns.js';

/**
 * `node dist/retire-key.js <kid>` — an operator's "this token-signing key is compromised": from now
 * on no service accepts a token it signed (a `kid` revocation in Redis, checked on every verify, and
 * kept in Postgres so identity re-seeds Redis after a restart), identity stops publishing it, and
 * every identity replica signs with a new key within a minute. Run it where identity runs
 * (`kubectl exec deploy/<release>-identity -- node dist/retire-key.js <kid>`).
 */
const shape = {
  DATABASE_URL: databaseConfigShape.DATABASE_URL,
  REDIS_URL: env.url('Redis URL.', ['redis', 'rediss']),
  ...redisConnectionConfigShape,
};

async function main(): Promise<number> {
  const kid = process.argv[2];
  if (!kid || !/^[A-Za-z0-9_-]{1,128}$/.test(kid)) {
    process.stderr.write('usage: retire-key <kid>\n');
    return 64;
  }
  let config;
  try {
    config = loadConfig(shape);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`custos-identity retire-key: ${err.message}\n`);
      return 78;
    }
    throw err;
  }
  const logger = createLogger({ service: 'identity-retire-key' });
  const pool = createPool(config.DATABASE_URL, 1, logger, 'custos-identity-retire-key');
  const redis = new Redis(config.REDIS_URL, {
    maxRetriesPerRequest: 1,
    lazyConnect: true,
    ...redisConnectionOptions(config),
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect().catch(() => undefined);
    let found: boolean;
    try {
      found = await retireCompromisedKey(createDatabase(pool), redis, logger, kid);
    } catch (err) {
      logger.error({ err: describeError(err) }, 'kid revocation not mirrored to Redis');
      process.stderr.write(
        `signing key ${kid} is revoked in Postgres, but Redis did not take the revocation: ` +
          'other services accept its tokens until identity re-seeds Redis, within a minute of Redis answering; run this again then\n',
      );
      return 2;
    }
    if (!found) {
      process.stderr.write(`no signing key with kid ${kid}\n`);
      return 1;
    }
    process.stdout.write(
      `signing key ${kid} revoked: its tokens are refused now; identity signs with a new key within a minute\n`,
    );
    return 0;
  } catch (err) {
    logger.error({ err: describeError(err) }, 'retire-key failed');
    return 1;
  } finally {
    redis.disconnect();
    await pool.end();
  }
}

void main().then((code) => {
  process.exitCode = code;
});
