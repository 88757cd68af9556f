import http from 'node:http';
import { Redis } from 'ioredis';
import { IdentityKeys, redisAnswers, tokenTrustOf } from '@custos/auth';
import { describeError, runService } from '@custos/service-kit';
import { configShape } from './config.js';
import { createApp } from './http/app.js';
import { parseTrustedProxies } from './http/client-ip.js';
import { connectPeers } from './peers.js';
import { gatewayRedisOptions } from './redis-options.js';

// Composition root of the gateway: peers, Redis, the HTTP app. Its gRPC server serves health only.
runService({
  name: 'gateway',
  configShape,
  async start(rt) {
    const c = rt.config;
    const trustedProxies = parseTrustedProxies(c.TRUSTED_PROXIES);
    const peers = connectPeers(c, rt.tls);
    rt.onShutdown('peers', async () => peers.close());
    const redis = new Redis(c.REDIS_URL, gatewayRedisOptions(c.REDIS_URL, c));
    redis.on('error', (err) => rt.logger.warn({ err: describeError(err) }, 'redis error'));
    rt.onShutdown('redis', async () => {
      redis.disconnect();
    });
    await redis
      .connect()
      .catch((err: unknown) => rt.logger.warn({ err: describeError(err) }, 'redis unreachable at start'));
    // Reported, not required: without Redis the limiter lets requests through, and the credential
    // routes and token checks refuse (503) on their own.
    rt.dependencies.add({ name: 'redis', required: false, check: () => redisAnswers(redis) });

    const app = createApp({
      logger: rt.logger,
      custodyRegionHeader: c.CUSTODY_REGION_HEADER,
      registry: rt.metrics.registry,
      redis,
      peers,
      trustedProxies,
      rateLimit: { ratePerSecond: c.RATE_LIMIT_RPS, burst: c.RATE_LIMIT_BURST },
      authRateLimit: { ratePerSecond: c.AUTH_RATE_LIMIT_PER_MINUTE / 60, burst: c.AUTH_RATE_LIMIT_BURST },
      // The exchange limits never refuse what the credential limit alone would let through.
      exchangeRateLimit: {
        perKey: {
          ratePerSecond:
            Math.max(c.EXCHANGE_RATE_LIMIT_PER_KEY_PER_MINUTE, c.AUTH_RATE_LIMIT_PER_MINUTE) / 60,
          burst: Math.max(c.EXCHANGE_RATE_LIMIT_PER_KEY_BURST, c.AUTH_RATE_LIMIT_BURST),
        },
        perIp: {
          ratePerSecond: Math.max(c.EXCHANGE_RATE_LIMIT_PER_IP_PER_MINUTE, c.AUTH_RATE_LIMIT_PER_MINUTE) / 60,
          burst: Math.max(c.EXCHANGE_RATE_LIMIT_PER_IP_BURST, c.AUTH_RATE_LIMIT_BURST),
        },
      },
      healthTimeoutMs: c.HEALTH_TIMEOUT_MS,
      ownDependenciesDown: () => rt.dependencies.unavailable,
      identityKeys: IdentityKeys.overGrpc(peers.identity, redis, rt.logger, tokenTrustOf(rt.config), {
        requirePublished: true,
        outcomes: rt.metrics.tokenRevocationChecks,
      }),
      ipRulesCacheTtlMs: c.IP_RULES_CACHE_TTL_MS,
    });
    const server = http.createServer(app);
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(c.PORT, c.HOST, resolve);
    });
    rt.onShutdown(
      'http',
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        }),
    );
    rt.logger.info({ url: `http://${c.HOST}:${c.PORT}` }, 'HTTP API listening');
  },
});
