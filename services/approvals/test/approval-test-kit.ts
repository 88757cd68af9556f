import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { AgentPrincipal, UserPrincipal, UserRole } from '@custos/auth';
import type { Agent, ApprovalRule } from '@custos/proto/custos/identity/v1/agents';
import { ApprovalRule as ApprovalRuleMessage } from '@custos/proto/custos/identity/v1/agents';
import {
  CustosError,
  NotFoundError,
  PermissionDeniedError,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import type pg from 'pg';
import { ApprovalService } from '../src/approvals/approval-service';
import { ApprovalStore } from '../src/approvals/approval-store';
import type { CreateApprovalInput, CredentialType } from '../src/approvals/approval-types';
import { SCHEMA } from '../src/db/schema';

export const logger = createLogger({ service: 'approvals-test', level: 'silent' });

/** A human of `orgId` with `role`, as the gRPC edge hands it to the service. */
export function human(orgId: string, role: UserRole = 'admin', userId = randomUUID()): UserPrincipal {
  return {
    kind: 'user',
    orgId,
    userId,
    role,
    platformAdmin: false,
    amr: [],
    requirePasskeyForVaults: false,
    tokenId: 't',
    issuedAt: 0,
    expiresAt: 0,
    issuer: 'i',
  };
}

/** An agent of `orgId`. */
export function agent(orgId: string, agentId = randomUUID()): AgentPrincipal {
  return {
    kind: 'agent',
    orgId,
    agentId,
    scopes: [],
    vaultIds: [],
    intentsApiEnabled: true,
    proxyEnabled: false,
    tokenId: 't',
    issuedAt: 0,
    expiresAt: 0,
    issuer: 'i',
  };
}

/** A rule of an agent's action_approval_policy, defaults filled in. */
export function rule(r: Partial<ApprovalRule>): ApprovalRule {
  return ApprovalRuleMessage.fromPartial(r as Parameters<typeof ApprovalRuleMessage.fromPartial>[0]);
}

/**
 * A fake identity peer (a unit-test fake of another service): the agents it knows with their
 * policies and creators, and step-up credentials: `totp:<anything>` proves totp, `pw:<x>` password,
 * `rat_<x>` a re-auth token, anything else is refused as identity refuses it.
 */
export class FakeIdentity {
  readonly agents = new Map<string, Partial<Agent>>();
  readonly stepUps: { userId: string; purpose: string; credential: string }[] = [];

  async agentInOrg(orgId: string, agentId: string): Promise<Agent> {
    const a = this.agents.get(`${orgId}/${agentId}`);
    if (!a) throw new NotFoundError('agent', agentId);
    return { createdBy: '', ...a } as Agent;
  }

  async confirmStepUp(
    user: { userId: string; orgId: string },
    purpose: string,
    credential: string,
  ): Promise<CredentialType> {
    this.stepUps.push({ userId: user.userId, purpose, credential });
    if (credential.startsWith('totp:')) return 'totp';
    if (credential.startsWith('pw:')) return 'password';
    if (credential.startsWith('rat_')) return 'reauth_token';
    throw new PermissionDeniedError('the password is not correct', {
      type: 'step_up_required',
      extensions: { purpose },
    });
  }
}

/** A fresh database with approvals' migrations, the store and the service with a fake identity. */
export async function approvalsTestKit(prefix: string, ttlSeconds = 86400) {
  const database = await createTestDatabase(prefix);
  const pool: pg.Pool = createPool(database.url, 60, logger, 'approvals-test');
  await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
  const store = new ApprovalStore(createDatabase(pool));
  const identity = new FakeIdentity();
  const service = new ApprovalService({ store, identity, settings: { ttlSeconds } });
  return {
    pool,
    store,
    identity,
    service,
    async close() {
      await pool.end();
      await database.drop();
    },
    /** The outbox rows of an approval: event names (audit records as `audit:<action>`), in order. */
    async recordsOf(approvalId: string): Promise<string[]> {
      const { rows } = await pool.query<{ name: string; payload: Record<string, unknown> }>(
        `SELECT name, payload FROM ${SCHEMA}.outbox ORDER BY seq`,
      );
      return rows
        .filter((r) =>
          r.name === 'audit.recorded'
            ? r.payload['resource_id'] === approvalId
            : r.payload['approval_id'] === approvalId,
        )
        .map((r) => (r.name === 'audit.recorded' ? `audit:${String(r.payload['action'])}` : r.name));
    },
    /** The outbox payloads of one event name for an approval. */
    async payloadsOf(approvalId: string, name: string): Promise<Record<string, unknown>[]> {
      const { rows } = await pool.query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM ${SCHEMA}.outbox WHERE name = $1 ORDER BY seq`,
        [name],
      );
      return rows
        .map((r) => r.payload)
        .filter((p) => (name === 'audit.recorded' ? p['resource_id'] : p['approval_id']) === approvalId);
    },
    /** Moves an approval's expiry into the past (what time would do). */
    async expireNow(approvalId: string): Promise<void> {
      await pool.query(
        `UPDATE ${SCHEMA}.approvals SET expires_at = now() - interval '1 second' WHERE id = $1`,
        [approvalId],
      );
    },
    /** The row as stored. */
    async row(approvalId: string): Promise<Record<string, unknown>> {
      const { rows } = await pool.query(`SELECT * FROM ${SCHEMA}.approvals WHERE id = $1`, [approvalId]);
      return rows[0]!;
    },
  };
}

/** A platform-created approval of a transaction, as signer asks for it. */
export function transactionApproval(
  orgId: string,
  agentId: string,
  over: Partial<CreateApprovalInput> = {},
): CreateApprovalInput {
  return {
    orgId,
    agentId,
    agentCreatedBy: '',
    action: 'agent_transaction',
    targetType: 'transaction',
    targetId: randomUUID(),
    summary: { title: 'Pay the supplier', body: '', fields: [] },
    payload: { chain: 'anvil', to: '0x0000000000000000000000000000000000000001', value: '1000' },
    preview: { chain: 'anvil' },
    rule: { risk_tier: 1 },
    riskTier: 1,
    requirement: undefined,
    expirySecs: 0,
    ...over,
  };
}

/** The error a promise rejects with (fails the test when it resolves). */
export async function refusal(p: Promise<unknown>): Promise<CustosError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof CustosError) return err;
    throw err;
  }
  throw new Error('expected a refusal, but the call succeeded');
}
