import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import type { Agent } from '@custos/proto/custos/identity/v1/agents';
import {
  CustosError,
  type Database,
  type Logger,
  createDatabase,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA, guardrailLedger, guardrailReservations, outbox } from '../db/schema.js';
import type { IntentScope } from '../intents/intent-context.js';
import { GUARDRAIL_VIOLATION, Guardrails, WOULD_DENY, guardrailApprovalMatch } from './guardrails.js';

// The guardrails of the signing path on a real Postgres (signer's migrations): refusals in
// `enforce` change nothing and record nothing here (IntentContext.audited records the refusal);
// `log` lets the request through with one `guardrail_shadow.would_deny` per violation in the
// reserving transaction; parallel requests cannot pass a daily cap together; a release gives a
// reservation back once.

const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;
const ETH = 10n ** 18n;
const ORG = randomUUID();
const TO = `0x${'d'.repeat(40)}`;

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let pool: ReturnType<typeof createPool>;
let db: Database;
let guardrails: Guardrails;

beforeAll(async () => {
  database = await createTestDatabase('custos_signer_guardrails');
  pool = createPool(database.url, 25, logger, 'guardrails-test');
  await migrateSchema(pool, {
    schema: SCHEMA,
    migrationsFolder: path.join(__dirname, '..', '..', 'migrations'),
  });
  db = createDatabase(pool);
  guardrails = new Guardrails({ db, logger });
});

afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

function scopeOf(settings: Partial<Agent>, chain = { name: 'anvil', chainId: 31337n }): IntentScope {
  const agentId = randomUUID();
  return {
    agent: { kind: 'agent', orgId: ORG, agentId } as IntentScope['agent'],
    settings: {
      perChainGuardrails: {},
      txToAllowlist: [],
      txAllowedChains: [],
      eip712DomainAllowlist: [],
      eip712DefaultPolicy: 'deny',
      executionGuardrails: { enforcement: 'log' },
      ...settings,
    } as Agent,
    chain: {
      name: chain.name,
      chainId: chain.chainId,
      family: 'evm',
      nativeDecimals: 18,
    } as IntentScope['chain'],
    key: {} as IntentScope['key'],
    adapter: {} as IntentScope['adapter'],
  };
}
const enforce = { executionGuardrails: { enforcement: 'enforce' } };

async function ledgerOf(agentId: string) {
  const [row] = await db.select().from(guardrailLedger).where(eq(guardrailLedger.agentId, agentId));
  return row;
}
async function recordsOf(agentId: string) {
  const rows = await db
    .select()
    .from(outbox)
    .where(and(eq(outbox.name, 'audit.recorded'), sql`${outbox.payload}->>'actor_id' = ${agentId}`));
  return rows.map((r) => r.payload as { action: string; metadata: Record<string, unknown> });
}

async function refusal(p: Promise<unknown>): Promise<CustosError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof CustosError)) throw new Error(`expected a refusal, got ${String(err)}`);
  return err;
}

describe('Guardrails on a real database', () => {
  it('enforce: a transaction above tx_max_value is 403 guardrail_violation naming the setting and reason; nothing reserved or recorded', async () => {
    const s = scopeOf({ ...enforce, txMaxValueEth: '0.5' });
    const err = await refusal(
      guardrails.admitTransaction(s, { to: TO, value: ETH }, { kind: 'transaction', reserve: true }),
    );
    expect(err.httpStatus).toBe(403);
    expect(err.type).toBe(GUARDRAIL_VIOLATION);
    expect(err.field).toBe('tx_max_value');
    expect(err.extensions).toEqual({ reason_code: 'tx_max_value_exceeded' });
    const row = await ledgerOf(s.agent.agentId);
    expect(row?.txCount ?? 0).toBe(0);
    expect(row?.valueSpent ?? '0').toBe('0');
    expect(await recordsOf(s.agent.agentId)).toEqual([]);
  });

  it('log: the same transaction goes through, reserved, with one would_deny record per violation', async () => {
    const s = scopeOf({ txMaxValueEth: '0.5', txToAllowlist: [`0x${'e'.repeat(40)}`] });
    const a = await guardrails.admitTransaction(
      s,
      { to: TO, value: ETH, gasLimit: 21_000n, maxFeePerGas: 10n ** 9n },
      { kind: 'transaction', reserve: true },
    );
    expect(a.verdicts.map((v) => v.reasonCode).sort()).toEqual(['to_not_allowed', 'tx_max_value_exceeded']);
    expect(a.reservationId).toBeDefined();
    const row = await ledgerOf(s.agent.agentId);
    expect(row).toMatchObject({
      valueSpent: ETH.toString(),
      gasSpent: (21_000n * 10n ** 9n).toString(),
      txCount: 1,
    });
    expect(row!.day).toBe(new Date().toISOString().slice(0, 10));
    const recs = await recordsOf(s.agent.agentId);
    expect(recs.map((r) => r.action)).toEqual([WOULD_DENY, WOULD_DENY]);
    expect(recs.map((r) => r.metadata['reason_code']).sort()).toEqual([
      'to_not_allowed',
      'tx_max_value_exceeded',
    ]);
    expect(recs[0]!.metadata).toMatchObject({ chain: 'anvil', intent: 'transaction', enforcement: 'log' });
  });

  it('log: malformed settings are refused all the same (fail closed)', async () => {
    const s = scopeOf({ txDailyLimitEth: 'lots' });
    const err = await refusal(
      guardrails.admitTransaction(s, { to: TO, value: 1n }, { kind: 'transaction', reserve: true }),
    );
    expect(err.extensions['reason_code']).toBe('settings_invalid');
    expect(err.field).toBe('tx_daily_limit');
    expect((await ledgerOf(s.agent.agentId))?.txCount ?? 0).toBe(0);
  });

  it('20 parallel transactions against a 5 ETH daily cap: exactly 5 admitted, the ledger at the cap', async () => {
    const s = scopeOf({ ...enforce, txDailyLimitEth: '5' });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () =>
        guardrails.admitTransaction(s, { to: TO, value: ETH }, { kind: 'transaction', reserve: true }),
      ),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter(
      (r) =>
        r.status === 'rejected' &&
        r.reason instanceof CustosError &&
        r.reason.extensions['reason_code'] === 'tx_daily_limit_exceeded',
    );
    expect(ok).toHaveLength(5);
    expect(refused).toHaveLength(15);
    expect(await ledgerOf(s.agent.agentId)).toMatchObject({ valueSpent: (5n * ETH).toString(), txCount: 5 });
  });

  it('a release gives the reservation back once, and the freed room is usable again', async () => {
    const s = scopeOf({ ...enforce, txDailyLimitEth: '1' });
    const a = await guardrails.admitTransaction(
      s,
      { to: TO, value: ETH },
      { kind: 'transaction', reserve: true },
    );
    await refusal(
      guardrails.admitTransaction(s, { to: TO, value: 1n }, { kind: 'transaction', reserve: true }),
    );
    await guardrails.release(a, 'test');
    await guardrails.release(a, 'test again');
    expect(await ledgerOf(s.agent.agentId)).toMatchObject({ valueSpent: '0', txCount: 0 });
    const [r] = await db
      .select()
      .from(guardrailReservations)
      .where(eq(guardrailReservations.id, a.reservationId!));
    expect(r!.releasedAt).not.toBeNull();
    await guardrails.admitTransaction(s, { to: TO, value: ETH }, { kind: 'transaction', reserve: true });
    expect(await ledgerOf(s.agent.agentId)).toMatchObject({ valueSpent: ETH.toString(), txCount: 1 });
  });

  it('approve: a violation waits for a human (violations, holding), refuses otherwise, and passes once approved, without a shadow record', async () => {
    const s = scopeOf({
      executionGuardrails: { enforcement: 'approve' },
      txMaxValueEth: '0.5',
    } as Partial<Agent>);
    const v = await guardrails.violations(s, { to: TO, value: ETH });
    expect(v.map((x) => x.reasonCode)).toEqual(['tx_max_value_exceeded']);
    expect(guardrailApprovalMatch(v)).toMatchObject({
      tier: 2,
      ruleJson: { reason: 'guardrail_violation', violations: [{ reason_code: 'tx_max_value_exceeded' }] },
    });
    // Held: judged, not refused, nothing taken.
    await guardrails.admitTransaction(
      s,
      { to: TO, value: ETH },
      { kind: 'transaction', reserve: false, holding: true },
    );
    expect((await ledgerOf(s.agent.agentId))?.txCount ?? 0).toBe(0);
    // Not approved (it should have been held): refused as under enforce.
    const err = await refusal(
      guardrails.admitTransaction(s, { to: TO, value: ETH }, { kind: 'transaction', reserve: true }),
    );
    expect(err.type).toBe(GUARDRAIL_VIOLATION);
    // Approved for another guardrail only: still refused.
    await refusal(
      guardrails.admitTransaction(
        s,
        { to: TO, value: ETH },
        { kind: 'transaction', reserve: true, approvedCodes: ['to_not_allowed'] },
      ),
    );
    // Approved: through and reserved, no would_deny record.
    const a = await guardrails.admitTransaction(
      s,
      { to: TO, value: ETH },
      { kind: 'transaction', reserve: true, approvedCodes: ['tx_max_value_exceeded'] },
    );
    expect(a.reservationId).toBeDefined();
    expect((await ledgerOf(s.agent.agentId))?.txCount).toBe(1);
    expect(await recordsOf(s.agent.agentId)).toEqual([]);
  });

  it('reserve: false judges against the totals and takes nothing, records nothing', async () => {
    const s = scopeOf({ txMaxValueEth: '0.1' });
    const a = await guardrails.admitTransaction(
      s,
      { to: TO, value: ETH },
      { kind: 'transaction', reserve: false },
    );
    expect(a.reservationId).toBeUndefined();
    expect(a.verdicts).toHaveLength(1);
    expect((await ledgerOf(s.agent.agentId))?.txCount ?? 0).toBe(0);
    expect(await recordsOf(s.agent.agentId)).toEqual([]);
  });

  it('the day totals are per chain: another chain has its own cap', async () => {
    const s = scopeOf({ ...enforce, txDailyLimitEth: '1' });
    await guardrails.admitTransaction(s, { to: TO, value: ETH }, { kind: 'transaction', reserve: true });
    const other = { ...s, chain: { ...s.chain, name: 'base', chainId: 8453n } };
    await guardrails.admitTransaction(other, { to: TO, value: ETH }, { kind: 'transaction', reserve: true });
    const today = await guardrails.ledger.today(s.agent.agentId);
    expect(today.map((t) => [t.chainName, t.spent]).sort()).toEqual([
      ['anvil', ETH],
      ['base', ETH],
    ]);
  });

  it('typed data: default deny is 403 in enforce, a record in log; a domain of another chain is refused in log too', async () => {
    const domain = { name: 'Permit2', chainId: '31337', verifyingContract: TO };
    const e = scopeOf({ ...enforce });
    const err = await refusal(guardrails.judgeTypedData(e, domain));
    expect(err.extensions['reason_code']).toBe('eip712_domain_not_allowed');
    expect(await recordsOf(e.agent.agentId)).toEqual([]);
    const allowed = scopeOf({ ...enforce, eip712DomainAllowlist: ['Permit2'] });
    expect(await guardrails.judgeTypedData(allowed, domain)).toEqual([]);
    const l = scopeOf({});
    expect(await guardrails.judgeTypedData(l, domain)).toHaveLength(1);
    const recs = await recordsOf(l.agent.agentId);
    expect(recs).toEqual([
      expect.objectContaining({
        action: WOULD_DENY,
        metadata: expect.objectContaining({ reason_code: 'eip712_domain_not_allowed', intent: 'typed_data' }),
      }),
    ]);
    const wrong = await refusal(
      guardrails.judgeTypedData(scopeOf({ eip712DefaultPolicy: 'allow' }), { ...domain, chainId: '1' }),
    );
    expect(wrong.extensions['reason_code']).toBe('eip712_domain_chain_mismatch');
  });
});
