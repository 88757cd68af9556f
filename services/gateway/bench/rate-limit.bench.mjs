// Benchmark of the gateway's rate limiter against rate-limiter-flexible on this machine's Redis:
// 20,000 checks from 64 concurrent callers, each implementation over the same client keys, in
// alternating rounds (the median is reported). Two load shapes: many clients (256 keys, nearly
// every check allowed) and one hot client (a single key, nearly every check refused).
//
//   pnpm turbo run build --filter=@custos/gateway && node services/gateway/bench/rate-limit.bench.mjs
//
// Contenders, all at 100/s with a burst of 200 (DECISIONS.md):
//   token-bucket     the gateway's limiter (src/http/rate-limit.ts): one EVALSHA per check
//   token-bucket-eval the same script sent with EVAL each time (the gateway's previous form)
//   rlf-bursty       rate-limiter-flexible BurstyRateLimiter(100 per 1 s, 100 more per 2 s): the
//                    library's "rate with a burst"; a refused check costs a second round trip
//   rlf-window       rate-limiter-flexible RateLimiterRedis(200 per 2 s): one fixed window, which
//                    lets 400 through across a window edge (not the decided limit; for reference)
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { BurstyRateLimiter, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

const require = createRequire(import.meta.url);
const { tokenBucket } = require('../dist/http/rate-limit.js');

const TOTAL = Number(process.env.CHECKS ?? 20_000);
const CALLERS = Number(process.env.CALLERS ?? 64);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const RATE = 100;
const BURST = 200;

async function run(check, keys) {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (next < TOTAL) {
        const i = next++;
        await check(`203.0.113.${i % keys}`);
      }
    }),
  );
  return TOTAL / (Number(process.hrtime.bigint() - started) / 1e9);
}

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  maxRetriesPerRequest: 0,
  enableOfflineQueue: false,
  lazyConnect: true,
});
await redis.connect();
const tag = `bench-rl-${process.pid}`;
const refusedOk = (e) => {
  if (e instanceof RateLimiterRes) return false;
  throw e;
};
// The gateway's script text, as ioredis keeps it once tokenBucket has defined the command.
tokenBucket(redis, { ratePerSecond: RATE, burst: BURST });
const tokenBucketLua = redis.scriptsSet.custosTokenBucket.lua;

/** Each contender, made fresh per round so buckets start full. */
const contenders = {
  'token-bucket': (p) => {
    const take = tokenBucket(redis, { ratePerSecond: RATE, burst: BURST });
    return (k) => take(`${p}:${k}`);
  },
  'token-bucket-eval': (p) => (k) => redis.eval(tokenBucketLua, 1, `${p}:${k}`, RATE, BURST, Date.now(), 1),
  'rlf-bursty': (p) => {
    const l = new BurstyRateLimiter(
      new RateLimiterRedis({ storeClient: redis, points: RATE, duration: 1, keyPrefix: `${p}:r` }),
      new RateLimiterRedis({
        storeClient: redis,
        points: BURST - RATE,
        duration: BURST / RATE,
        keyPrefix: `${p}:b`,
      }),
    );
    return (k) => l.consume(k).then(() => true, refusedOk);
  },
  'rlf-window': (p) => {
    const l = new RateLimiterRedis({
      storeClient: redis,
      points: BURST,
      duration: BURST / RATE,
      keyPrefix: p,
    });
    return (k) => l.consume(k).then(() => true, refusedOk);
  },
};

const shapes = { 'many clients': 256, 'one hot client': 1 };
const results = {};
const names = Object.keys(contenders);
for (let round = 0; round < ROUNDS; round++) {
  // Alternate the order so no contender always runs on a warmer (or busier) machine.
  const order = round % 2 ? [...names].reverse() : names;
  for (const name of order) {
    for (const [shape, keys] of Object.entries(shapes)) {
      const check = contenders[name](`${tag}:${round}:${name}:${keys}`);
      ((results[name] ??= {})[shape] ??= []).push(await run(check, keys));
    }
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`${TOTAL} checks, ${CALLERS} callers, median of ${ROUNDS} rounds (checks/s):`);
for (const name of names) {
  const row = Object.keys(shapes).map((s) => `${s}: ${Math.round(median(results[name][s]))}`);
  console.log(`  ${name.padEnd(18)} ${row.join('   ')}`);
}
redis.disconnect();
