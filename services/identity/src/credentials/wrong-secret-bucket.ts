import type { Redis } from 'ioredis';
import { type Logger, describeError } from '@custos/service-kit';
import { type WrongSecretVerdict, retryAfterSeconds, wrongSecretVerdict } from './wrong-secret-fns.js';

// A fixed one-minute window per key, atomic in Redis: KEYS[1] the key's counter; ARGV[1] the
// window in ms. Returns {count in this window (this one included), ms left in the window}.
const COUNT_WRONG_SECRET = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
`;

const COMMAND = 'custosCountWrongSecret';
const WINDOW_MS = 60_000;

type WithCounter = Redis & {
  [COMMAND]: (key: string, windowMs: number) => Promise<[number, number]>;
};

/** What one counted wrong secret gets: its verdict, when the minute ends, and the limit. */
export interface WrongSecretCount {
  verdict: WrongSecretVerdict;
  retryAfter: number;
  perMinute: number;
}

/** Which kind of key a wrong secret was sent for (each has its own counters). */
export type ExchangeKeyKind = 'agent_key' | 'router_key' | 'personal_key';

/** The Redis key of a credential's wrong-secret counter (`custos:exref:<kind>:<key row id>`). */
export function wrongSecretKey(kind: ExchangeKeyKind, keyId: string): string {
  return `custos:exref:${kind}:${keyId.toLowerCase()}`;
}

/**
 * Counts the wrong secrets sent for each exchange key, across every client address and replica, so
 * that a flood of them writes a bounded number of audit records (wrong-secret-fns.ts). When Redis
 * does not answer, every refusal is audited as before (the answer stays the 401): an outage never
 * hides a refusal, it only lets records through.
 */
export class WrongSecretBucket {
  constructor(
    private readonly redis: Redis,
    private readonly perMinute: number,
    private readonly logger: Pick<Logger, 'warn'>,
  ) {
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: COUNT_WRONG_SECRET });
  }

  /** Counts one wrong secret for the key and says what the refusal gets (and its Retry-After). */
  async count(kind: ExchangeKeyKind, keyId: string): Promise<WrongSecretCount> {
    try {
      const [n, ttl] = await (this.redis as WithCounter)[COMMAND](wrongSecretKey(kind, keyId), WINDOW_MS);
      return {
        verdict: wrongSecretVerdict(Number(n), this.perMinute),
        retryAfter: retryAfterSeconds(Number(ttl), WINDOW_MS),
        perMinute: this.perMinute,
      };
    } catch (err) {
      this.logger.warn({ err: describeError(err) }, 'wrong-secret counter unavailable; refusal audited');
      return { verdict: 'audit', retryAfter: 0, perMinute: this.perMinute };
    }
  }
}
