import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { OutboxGroupCommit } from '@custos/events';
import {
  CustosError,
  ERROR_KINDS,
  type Database,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
  runWithRequestContext,
} from '@custos/service-kit';
import { createTestDatabase, waitFor } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import { AgentActivity } from '../src/agents/agent-activity';
import { AgentExchangeService } from '../src/agents/agent-exchange-service';
import { DEFAULT_AGENT_SETTINGS } from '../src/agents/agent-fns';
import { AgentStore } from '../src/agents/agent-store';
import { RouterKeyStore } from '../src/agents/router-key-store';
import { SECRET_TOKEN_PREFIXES, generateSecretToken } from '../src/credentials/secret-token-fns';
import { WrongSecretBucket } from '../src/credentials/wrong-secret-bucket';
import { SCHEMA, orgs } from '../src/db/schema';
import { SigningKeyRing } from '../src/tokens/signing-key-store';
import { TokenIssuer } from '../src/tokens/token-issuer';

// The agent-token exchange against real Postgres: its `auth.login` record goes through the outbox's
// group commit, and the token leaves only once that record is committed (fail-closed audit).

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const settings = { issuers: ['http://custos.test'], audience: 'custos-api', userAccessTtlSeconds: 900 };

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
    string,
    unknown
  >;
}

describe('agent-token exchange (real Postgres, group-committed audit)', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let store: AgentStore;
  let exchange: AgentExchangeService;
  let redis: Redis;
  const policyAsked: string[] = [];
  /** Wrong secrets audited per key and minute here (EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE). */
  const WRONG_PER_MINUTE = 3;

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_agent_exchange');
    pool = createPool(database.url, 8, logger, 'agent-exchange-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    const ring = new SigningKeyRing(
      db,
      { kek: randomBytes(32), rotationMs: 60_000, retiredKeyTtlMs: 86_400_000 },
      logger,
    );
    await ring.refresh();
    store = new AgentStore(db, pool);
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
    exchange = new AgentExchangeService(
      store,
      new RouterKeyStore(db),
      new TokenIssuer(ring, settings),
      // Stands in for the policy service's GetAgentScopes (a peer, not what identity runs on).
      {
        agentGrants: async (a) => {
          policyAsked.push(a.id);
          return { scopes: ['team/*'], vaultIds: [] };
        },
      },
      new OutboxGroupCommit({ pool, schema: SCHEMA }),
      new AgentActivity(store, logger),
      logger,
      new WrongSecretBucket(redis, WRONG_PER_MINUTE, logger),
    );
  });
  afterAll(async () => {
    redis.disconnect();
    await pool.end();
    await database.drop();
  });

  /** A new org with an active agent and its API key. */
  async function newAgent(): Promise<{ orgId: string; agentId: string; apiKey: string }> {
    const [org] = await db
      .insert(orgs)
      .values({ name: `org-${randomBytes(3).toString('hex')}` })
      .returning();
    const agent = await store.insert({
      orgId: org!.id,
      name: 'a',
      description: '',
      settings: DEFAULT_AGENT_SETTINGS,
      createdBy: '33333333-3333-4333-8333-333333333333',
    });
    const key = generateSecretToken(SECRET_TOKEN_PREFIXES.agentApiKey);
    await store.insertKey({ id: key.id, agentId: agent.id, secretHash: key.secretHash });
    return { orgId: org!.id, agentId: agent.id, apiKey: key.token };
  }

  const exchangeAs = (requestId: string, apiKey: string, agentId: string) =>
    runWithRequestContext({ requestId }, () => exchange.exchange(apiKey, agentId));

  async function recordsOf(
    orgId: string,
  ): Promise<Array<{ action: string; request_id: string; metadata: Record<string, unknown> }>> {
    const { rows } = await pool.query(
      `SELECT payload->>'action' AS action, payload->>'request_id' AS request_id, payload->'metadata' AS metadata
         FROM identity.outbox WHERE name = 'audit.recorded' AND org_id = $1`,
      [orgId],
    );
    return rows as Array<{ action: string; request_id: string; metadata: Record<string, unknown> }>;
  }

  it('hands out each of N parallel tokens only after its own auth.login record is committed', async () => {
    const { orgId, agentId, apiKey } = await newAgent();
    const n = 40;
    // Hold every INSERT into the outbox: no exchange may answer while its record cannot be committed.
    const holder = await pool.connect();
    let settled = 0;
    let pending: Array<Promise<{ token: string; expiresIn: number }>> = [];
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE identity.outbox IN SHARE MODE');
      pending = Array.from({ length: n }, (_, i) => {
        const p = exchangeAs(`par-${i}`, apiKey, agentId);
        void p.then(
          () => settled++,
          () => settled++,
        );
        return p;
      });
      // Every token is minted and the group commit's INSERT waits on the lock.
      await waitFor(async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = 'identity.outbox'::regclass`,
        );
        return (rows[0] as { n: number }).n > 0 && policyAsked.filter((id) => id === agentId).length === n;
      });
      expect(settled).toBe(0);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    const tokens = await Promise.all(pending);
    expect(new Set(tokens.map((t) => claimsOf(t.token)['jti'])).size).toBe(n);
    for (const t of tokens) {
      expect(claimsOf(t.token)).toMatchObject({ sub: `agent:${agentId}`, org: orgId, scopes: ['team/*'] });
    }
    const logins = (await recordsOf(orgId)).filter((r) => r.action === 'auth.login');
    expect(logins.map((r) => r.request_id).sort()).toEqual(
      Array.from({ length: n }, (_, i) => `par-${i}`).sort(),
    );
    expect(logins[0]!.metadata).toEqual({ method: 'agent_api_key', expires_in: 3600 });
    // last_active_at is written (once: later exchanges within the minute leave it), updated_at is not.
    const [row] = (
      await pool.query('SELECT last_active_at, updated_at, created_at FROM identity.agents WHERE id = $1', [
        agentId,
      ])
    ).rows as Array<{ last_active_at: Date | null; updated_at: Date; created_at: Date }>;
    expect(row!.last_active_at).not.toBeNull();
    expect(row!.updated_at.getTime()).toBe(row!.created_at.getTime());
  });

  describe('when the outbox refuses audit records', () => {
    const refuse = () =>
      pool.query(
        `CREATE OR REPLACE FUNCTION identity.test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.name = 'audit.recorded' THEN RAISE EXCEPTION 'outbox refuses audit records'; END IF;
         RETURN NEW; END $$;
         CREATE TRIGGER test_refuse_audit BEFORE INSERT ON identity.outbox
           FOR EACH ROW EXECUTE FUNCTION identity.test_refuse_audit();`,
      );
    const allow = () => pool.query('DROP TRIGGER IF EXISTS test_refuse_audit ON identity.outbox');
    afterEach(allow);

    it('answers 503 and hands out no token, for every one of parallel exchanges', async () => {
      const { orgId, agentId, apiKey } = await newAgent();
      await refuse();
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => exchangeAs(`fc-${i}`, apiKey, agentId)),
      );
      for (const r of results) {
        expect(r.status).toBe('rejected');
        const err = (r as PromiseRejectedResult).reason as CustosError;
        expect(err).toBeInstanceOf(CustosError);
        expect(ERROR_KINDS[err.kind].http).toBe(503);
        expect(err.message).not.toMatch(/outbox|trigger|SQL|ocv_/i);
      }
      expect(await recordsOf(orgId)).toEqual([]);

      await allow();
      const t = await exchangeAs('fc-after', apiKey, agentId);
      expect(claimsOf(t.token)['sub']).toBe(`agent:${agentId}`);
      expect((await recordsOf(orgId)).map((r) => r.request_id)).toEqual(['fc-after']);
    });

    it('still refuses a wrong secret with the one 401 (its record is best-effort)', async () => {
      const { orgId, agentId, apiKey } = await newAgent();
      const forged = `${apiKey.slice(0, -4)}${apiKey.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
      await refuse();
      await expect(exchangeAs('wrong-1', forged, agentId)).rejects.toMatchObject({
        kind: 'unauthenticated',
        message: 'invalid agent credentials',
      });
      expect(await recordsOf(orgId)).toEqual([]);
    });
  });

  it('audits a flood of wrong secrets for one key as WRONG_PER_MINUTE refusals and one limited record', async () => {
    const { orgId, agentId, apiKey } = await newAgent();
    const wrong = `${apiKey.slice(0, -4)}${apiKey.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        exchangeAs(`flood-${i}`, wrong, agentId).then(
          () => 'token',
          (err: unknown) => (err instanceof CustosError ? ERROR_KINDS[err.kind].http : 'other'),
        ),
      ),
    );
    expect(answers.filter((a) => a === 401)).toHaveLength(WRONG_PER_MINUTE);
    expect(answers.filter((a) => a === 429)).toHaveLength(30 - WRONG_PER_MINUTE);
    const records = await recordsOf(orgId);
    expect(records.filter((r) => r.action === 'auth.login_failed')).toHaveLength(WRONG_PER_MINUTE);
    const limited = records.filter((r) => r.action === 'auth.exchange_refusals_limited');
    expect(limited).toHaveLength(1);
    expect(limited[0]!.metadata).toMatchObject({ method: 'agent_api_key', per_minute: WRONG_PER_MINUTE });
    // The key's right secret is never refused by the wrong-secret limit.
    const t = await exchangeAs('right-after-flood', apiKey, agentId);
    expect(claimsOf(t.token)).toMatchObject({ sub: `agent:${agentId}` });
  });

  it('records each refusal of a known key under its org, with the same 401', async () => {
    const { orgId, agentId, apiKey } = await newAgent();
    const forged = `${apiKey.slice(0, -4)}${apiKey.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const other = await newAgent();
    const unknown = generateSecretToken(SECRET_TOKEN_PREFIXES.agentApiKey).token;
    const refusals: Array<[string, string, string]> = [
      ['r-secret', forged, agentId],
      ['r-mismatch', apiKey, other.agentId],
      ['r-unknown', unknown, agentId],
    ];
    for (const [id, key, agent] of refusals) {
      await expect(exchangeAs(id, key, agent)).rejects.toMatchObject({
        kind: 'unauthenticated',
        message: 'invalid agent credentials',
      });
    }
    await store.update(agentId, { isActive: false });
    await expect(exchangeAs('r-inactive', apiKey, agentId)).rejects.toMatchObject({
      kind: 'unauthenticated',
      message: 'invalid agent credentials',
    });
    const records = (await recordsOf(orgId)).sort((a, b) => a.request_id.localeCompare(b.request_id));
    // The unknown key id names no org: nothing to record it under.
    expect(records).toEqual([
      {
        action: 'auth.login_failed',
        request_id: 'r-inactive',
        metadata: { method: 'agent_api_key', reason: 'agent_inactive' },
      },
      {
        action: 'auth.login_failed',
        request_id: 'r-mismatch',
        metadata: { method: 'agent_api_key', reason: 'agent_mismatch' },
      },
      {
        action: 'auth.login_failed',
        request_id: 'r-secret',
        metadata: { method: 'agent_api_key', reason: 'wrong_secret' },
      },
    ]);
    expect(await recordsOf(other.orgId)).toEqual([]);
  });
});
