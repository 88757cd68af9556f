import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { AbiCoder, JsonRpcProvider, Wallet, id as keccakId } from 'ethers';
import type { ApprovalRule } from '@custos/proto/custos/identity/v1/agents';
import type {
  Approval,
  ConsumeApprovalRequest,
  CreateApprovalRequest,
} from '@custos/proto/custos/approvals/v1/messages';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import {
  CustosError,
  canonicalJson,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { ApprovalGate } from '../src/approvals/approval-gate';
import { SCHEMA } from '../src/db/schema';
import { EvmRpcPool } from '../src/evm/evm-rpc';
import type { IntentContext, IntentScope } from '../src/intents/intent-context';
import { type Approvals, approvalRequired } from '../src/peers/approvals-client';
import { PreviewRpcPool } from '../src/preview';
import { TransactionService } from '../src/transactions/tx-service';
import { TxStore } from '../src/transactions/tx-store';
import { TxWatcher } from '../src/transactions/tx-watcher';
import { transactionMessage } from '../src/transactions/tx-fns';
import { solanaAdapter } from '../src/adapters/solana';
import { generateSolana } from '../src/adapters/solana/solana-keys';

// Signer's side of the approval gate (issue 19) against real Postgres and a real anvil, with a small
// fake of the approvals peer (its CreateApproval records what it was asked; its ConsumeApproval
// accepts or refuses as the test says — the exactly-once proof of the real conditional update is the
// approvals service's and the e2e's, not this file's).

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startMeshAnvil } = require(path.join(__dirname, '../../../tools/mesh/dist/anvil.js')) as {
  startMeshAnvil(): Promise<{ url: string; stop(): Promise<void> }>;
};

const logger = createLogger({ service: 'signer-test', level: 'silent' });
const RPC_TIMEOUT = 3000;

class FakeApprovals implements Approvals {
  created: CreateApprovalRequest[] = [];
  consumed: ConsumeApprovalRequest[] = [];
  /** What ConsumeApproval does: accept every call, accept only the first, refuse, or be down. */
  mode: 'accept' | 'once' | 'refuse' | 'down' = 'accept';
  createDown = false;
  /** What CreateApproval refuses with (INVALID_ARGUMENT as the approvals service answers it). */
  createError: CustosError | undefined;
  /** Resolves CreateApproval only when the test says (a slow peer). */
  createGate: Promise<void> | undefined;
  /** Runs once an approval is created, before it is answered (what happens to signer meanwhile). */
  afterCreate: ((r: CreateApprovalRequest) => Promise<void>) | undefined;
  private used = new Set<string>();

  /** CreateApproval calls begun (a slow one included). */
  asked = 0;

  async create(r: CreateApprovalRequest): Promise<Approval> {
    this.asked++;
    if (this.createDown) throw new CustosError('unavailable', { detail: 'approvals is down' });
    if (this.createError) throw this.createError;
    if (this.createGate) await this.createGate;
    this.created.push(r);
    if (this.afterCreate) await this.afterCreate(r);
    return { id: randomUUID(), ...r } as unknown as Approval;
  }

  async consume(r: ConsumeApprovalRequest): Promise<Approval> {
    this.consumed.push(r);
    if (this.mode === 'down') throw new CustosError('unavailable', { detail: 'approvals is down' });
    if (this.mode === 'refuse') throw approvalRequired('the approval is not approved', r.approvalId);
    if (this.mode === 'once') {
      if (this.used.has(r.approvalId)) throw approvalRequired('the approval was used', r.approvalId);
      this.used.add(r.approvalId);
    }
    return { id: r.approvalId } as unknown as Approval;
  }
}

const cond = (c: Record<string, unknown>) => ({
  chains: [],
  addresses: [],
  selectors: [],
  intentTypes: [],
  actions: [],
  actionKinds: [],
  ...c,
});
const RULE: ApprovalRule = {
  conditions: [cond({ type: 'value_above', thresholdWei: '1000000' })],
  riskTier: 2,
  skipWhen: [],
  requireWhen: [],
  expirySecs: '600',
};

describe('the approval gate of transactions (Postgres + anvil)', () => {
  let anvil: { url: string; stop(): Promise<void> };
  let chain: JsonRpcProvider;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let store: TxStore;
  let rpcPool: EvmRpcPool;
  let previewPool: PreviewRpcPool;

  beforeAll(async () => {
    anvil = await startMeshAnvil();
    chain = new JsonRpcProvider(anvil.url, 31337, { staticNetwork: true });
    rpcPool = new EvmRpcPool(RPC_TIMEOUT);
    previewPool = new PreviewRpcPool(RPC_TIMEOUT);
    database = await createTestDatabase('custos_signer');
    pool = createPool(database.url, 20, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    store = new TxStore(createDatabase(pool));
  }, 60_000);
  afterAll(async () => {
    rpcPool?.close();
    previewPool?.close();
    chain?.destroy();
    await anvil?.stop();
    await pool?.end();
    await database?.drop();
  });

  const ANVIL = { name: 'anvil', chainId: 31337n };
  const funded = async () => {
    const w = Wallet.createRandom();
    await chain.send('anvil_setBalance', [w.address, '0x56bc75e2d63100000']); // 100 ETH
    return w;
  };

  const rig = (
    w: Wallet,
    o: {
      rules?: ApprovalRule[];
      orgId?: string;
      store?: TxStore;
      scope?: Partial<IntentScope>;
      noGate?: boolean;
      approvals?: FakeApprovals;
      logger?: ReturnType<typeof createLogger>;
    } = {},
  ) => {
    const scope = {
      agent: {
        kind: 'agent',
        agentId: randomUUID(),
        orgId: o.orgId ?? randomUUID(),
        intentsApiEnabled: true,
      },
      settings: {
        createdBy: randomUUID(),
        actionApprovalPolicy: { rules: o.rules ?? [RULE] },
      },
      chain: {
        ...ANVIL,
        rpcUrl: anvil.url,
        family: 'evm',
        nativeDecimals: 18,
        nativeCurrency: 'ETH',
        isEnabled: true,
      },
      key: { id: randomUUID(), address: w.address, keyVersion: 1, custody: 'server' },
      ...o.scope,
    } as unknown as IntentScope;
    const intents = {
      audited: (_p: unknown, _a: string, _id: string, step: () => Promise<unknown>) => step(),
      open: async () => scope,
      loader: {
        withKey: async (_k: unknown, fn: (pk: Buffer) => unknown) =>
          fn(Buffer.from(w.privateKey.slice(2), 'hex')),
      },
    } as unknown as IntentContext;
    const approvals = o.approvals ?? new FakeApprovals();
    const service = new TransactionService({
      intents,
      store: o.store ?? store,
      rpc: rpcPool,
      identity: { requireAgentInOrg: async () => undefined },
      logger: o.logger ?? logger,
      rpcTimeoutMs: RPC_TIMEOUT,
      staleClaimMs: 1000,
      ...(o.noGate
        ? {}
        : {
            gate: new ApprovalGate({
              approvals,
              preview: previewPool,
              logger,
              previewTimeoutMs: RPC_TIMEOUT,
            }),
          }),
    });
    const to = Wallet.createRandom().address;
    const body = (b: Partial<SubmitTransactionRequest> = {}) => {
      const req = {
        agentId: scope.agent.agentId,
        chain: 'anvil',
        to,
        value: '2000000',
        data: '',
        simulateFirst: false,
        idempotencyKey: '',
        resumeTxId: '',
        unsupportedFields: [],
        ...b,
      } as SubmitTransactionRequest;
      // As the gateway sends it: the canonical JSON of the HTTP body.
      const http: Record<string, unknown> = { chain: req.chain, to: req.to, value: req.value };
      if (req.tokenMint) http['token_mint'] = req.tokenMint;
      if (req.data) http['data'] = req.data;
      if (req.resumeTxId) http['resume_tx_id'] = req.resumeTxId;
      if (req.summary) http['summary'] = req.summary;
      req.canonicalBody = canonicalJson(http);
      return req;
    };
    const submit = (b: Partial<SubmitTransactionRequest> = {}) =>
      service.submit(scope.agent, scope.agent.agentId, body(b));
    return { scope, submit, approvals, to };
  };

  const row = async (id: string) =>
    (
      await pool.query(
        'SELECT status, nonce, nonce_held, approval_id, tx_hash, signed_tx FROM signer.transactions WHERE id = $1',
        [id],
      )
    ).rows[0];
  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CustosError);
    return err as CustosError;
  };
  const sentBy = (w: Wallet) => chain.getTransactionCount(w.address, 'pending');

  it('a matching rule holds the transaction: awaiting_approval, no nonce, nothing signed or sent; the approval carries target, rule, tier, preview', async () => {
    const w = await funded();
    const { submit, approvals, scope, to } = rig(w);
    const summary = { title: 'Pay the supplier', body: '', fields: [{ label: 'to', value: to }] };
    const r = await submit({ summary });
    expect(r.tx).toMatchObject({ status: 'awaiting_approval', nonce: null, nonceHeld: false, txHash: null });
    expect(r.tx.approvalId).toMatch(/^[0-9a-f-]{36}$/);
    expect(transactionMessage(r.tx, true)).toMatchObject({
      status: 'awaiting_approval',
      approvalId: r.tx.approvalId,
      hasNonce: false,
      signedTx: '',
    });
    expect(await row(r.tx.id)).toMatchObject({ status: 'awaiting_approval', nonce: null, signed_tx: null });
    expect(await sentBy(w)).toBe(0);
    const nonces = await pool.query('SELECT 1 FROM signer.nonces WHERE key_id = $1', [scope.key.id]);
    expect(nonces.rowCount).toBe(0);
    expect(approvals.created).toHaveLength(1);
    const c = approvals.created[0]!;
    expect(c).toMatchObject({
      orgId: scope.agent.orgId,
      agentId: scope.agent.agentId,
      agentCreatedBy: (scope.settings as { createdBy: string }).createdBy,
      action: 'agent_transaction',
      targetType: 'transaction',
      targetId: r.tx.id,
      summary,
      payload: { chain: 'anvil', to, value: '2000000', data: '' },
      rule: {
        conditions: [{ type: 'value_above', threshold_wei: '1000000' }],
        risk_tier: 2,
        expiry_secs: 600,
      },
      riskTier: 2,
      expirySecs: '600',
    });
    expect(c.requirement).toBeUndefined();
    expect(c.preview).toMatchObject({
      chain: 'anvil',
      from: w.address,
      to,
      value_wei: '2000000',
      risk_tier: 2,
    });
    const audit = await pool.query<{ payload: string }>(
      "SELECT payload::text AS payload FROM signer.outbox WHERE payload::text LIKE '%' || $1 || '%' AND payload::text LIKE '%agent.transaction.awaiting_approval%'",
      [r.tx.id],
    );
    expect(audit.rowCount).toBe(1);
    expect(audit.rows[0]!.payload).toMatch(/"risk_tier": ?2/);
    // the record names the approval the transaction waits for
    expect(audit.rows[0]!.payload).toContain(`"approval_id": "${r.tx.approvalId}"`);
  });

  it('no matching rule: submitted as before (broadcast), no approval asked', async () => {
    const w = await funded();
    const { submit, approvals } = rig(w);
    const r = await submit({ value: '1000' });
    expect(r.tx.status).toBe('broadcast');
    expect(r.tx.approvalId).toBeNull();
    expect(approvals.created).toHaveLength(0);
  });

  it('resume with an accepted approval: the same row gets a nonce, is signed, broadcast and mined; the approval is consumed for that target', async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    const held = await submit();
    const r = await submit({ resumeTxId: held.tx.id });
    expect(r.tx).toMatchObject({
      id: held.tx.id,
      status: 'broadcast',
      nonce: 0,
      approvalId: held.tx.approvalId,
    });
    expect(approvals.consumed).toEqual([
      {
        approvalId: held.tx.approvalId,
        orgId: scope.agent.orgId,
        agentId: scope.agent.agentId,
        action: 'agent_transaction',
        targetType: 'transaction',
        targetId: held.tx.id,
      },
    ]);
    const receipt = await chain.waitForTransaction(r.tx.txHash!, 1, 10_000);
    expect(receipt?.status).toBe(1);
    expect(await sentBy(w)).toBe(1);
    // The watcher follows it to confirmed as any submission.
    const wt = new TxWatcher(
      { store, chains: { resolve: async () => ({ ...scope.chain }) } as never, rpc: rpcPool, logger },
      { intervalMs: 20, batch: 50, staleMs: 0, rpcTimeoutMs: RPC_TIMEOUT },
    );
    await wt.round();
    expect(await row(held.tx.id)).toMatchObject({ status: 'confirmed', approval_id: held.tx.approvalId });
    // A second resume of the same transaction: it is no longer awaiting → 403, nothing sent.
    const again = await refusal(submit({ resumeTxId: held.tx.id }));
    expect(again).toMatchObject({ kind: 'permission_denied', type: 'approval_required' });
    expect(again.extensions).toEqual({ approval_request_id: held.tx.approvalId });
    expect(approvals.consumed).toHaveLength(1);
    expect(await sentBy(w)).toBe(1);
  });

  it('a refused consume is 403 approval_required naming the approval; the row is unchanged and nothing is sent', async () => {
    const w = await funded();
    const { submit, approvals } = rig(w);
    const held = await submit();
    const before = await row(held.tx.id);
    approvals.mode = 'refuse';
    const err = await refusal(submit({ resumeTxId: held.tx.id }));
    expect(err).toMatchObject({ kind: 'permission_denied', type: 'approval_required', httpStatus: 403 });
    expect(err.extensions).toEqual({ approval_request_id: held.tx.approvalId });
    expect(await row(held.tx.id)).toEqual(before);
    expect(await sentBy(w)).toBe(0);
    // …and it can still be resumed once the approval is usable.
    approvals.mode = 'accept';
    expect((await submit({ resumeTxId: held.tx.id })).tx.status).toBe('broadcast');
  });

  it('approvals unreachable on resume: 503, row unchanged', async () => {
    const w = await funded();
    const { submit, approvals } = rig(w);
    const held = await submit();
    approvals.mode = 'down';
    const err = await refusal(submit({ resumeTxId: held.tx.id }));
    expect(err.kind).toBe('unavailable');
    expect(await row(held.tx.id)).toMatchObject({ status: 'awaiting_approval', nonce: null });
    expect(await sentBy(w)).toBe(0);
  });

  it('a failure after the approval was consumed, before a nonce was recorded: the row ends failed (the approval covered one attempt), nothing sent', async () => {
    const w = await funded();
    const broken = Object.assign(Object.create(store), {
      allocateAndInsert: async () => {
        throw new Error('database connection lost');
      },
    }) as TxStore;
    const { submit, approvals } = rig(w, { store: broken });
    const held = await submit();
    const err = await submit({ resumeTxId: held.tx.id }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(approvals.consumed).toHaveLength(1);
    const r = await pool.query('SELECT status, error_message, nonce FROM signer.transactions WHERE id = $1', [
      held.tx.id,
    ]);
    expect(r.rows[0]).toMatchObject({ status: 'failed', nonce: null });
    expect(r.rows[0].error_message).toMatch(/approval was used/);
    expect(await sentBy(w)).toBe(0);
  });

  it('a resume whose body differs (value, recipient, summary) is 403 and never consumes', async () => {
    const w = await funded();
    const { submit, approvals } = rig(w);
    const held = await submit();
    for (const b of [
      { value: '3000000' },
      { to: Wallet.createRandom().address },
      { summary: { title: 'something else', body: '', fields: [] } },
    ]) {
      const err = await refusal(submit({ ...b, resumeTxId: held.tx.id }));
      expect(err).toMatchObject({ type: 'approval_required' });
      expect(err.extensions).toEqual({ approval_request_id: held.tx.approvalId });
    }
    expect(approvals.consumed).toHaveLength(0);
    expect(await row(held.tx.id)).toMatchObject({ status: 'awaiting_approval', nonce: null });
  });

  it("another agent's held transaction, an unknown id or a non-uuid: 403 without naming the approval, nothing consumed", async () => {
    const w = await funded();
    const a = rig(w);
    const held = await a.submit();
    const b = rig(await funded(), { orgId: (a.scope.agent as { orgId: string }).orgId });
    for (const id of [held.tx.id, randomUUID(), 'not-a-uuid']) {
      const err = await refusal(b.submit({ to: a.to, resumeTxId: id }));
      expect(err).toMatchObject({ kind: 'permission_denied', type: 'approval_required' });
      expect(err.extensions).toEqual({});
    }
    expect(b.approvals.consumed).toHaveLength(0);
    expect(await row(held.tx.id)).toMatchObject({ status: 'awaiting_approval' });
  });

  it('CreateApproval failing: the row ends failed with the reason, 503, nothing signed; an Idempotency-Key retry runs anew', async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    approvals.createDown = true;
    const err = await refusal(submit({ idempotencyKey: 'k-create-down' }));
    expect(err.kind).toBe('unavailable');
    const rows = await pool.query(
      'SELECT id, status, error_message, nonce FROM signer.transactions WHERE key_id = $1',
      [scope.key.id],
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]).toMatchObject({ status: 'failed', nonce: null });
    expect(rows.rows[0].error_message).toMatch(/approval could not be requested/);
    approvals.createDown = false;
    const retry = await submit({ idempotencyKey: 'k-create-down' });
    expect(retry.replayed).toBe(false);
    expect(retry.tx.status).toBe('awaiting_approval');
    expect(await sentBy(w)).toBe(0);
  });

  it('CreateApproval refusing the summary (INVALID_ARGUMENT naming summary.title): 400 naming it, the row failed with the reason, the key given back', async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    approvals.createError = new CustosError('invalid_argument', {
      detail: 'must not be blank',
      field: 'summary.title',
    });
    const err = await refusal(
      submit({ idempotencyKey: 'k-bad-summary', summary: { title: ' ', body: '', fields: [] } }),
    );
    expect(err).toMatchObject({
      kind: 'invalid_argument',
      field: 'summary.title',
      detail: 'must not be blank',
    });
    const rows = await pool.query(
      'SELECT status, error_message, nonce FROM signer.transactions WHERE key_id = $1',
      [scope.key.id],
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]).toMatchObject({ status: 'failed', nonce: null });
    expect(rows.rows[0].error_message).toMatch(/summary\.title must not be blank/);
    expect(await sentBy(w)).toBe(0);
    approvals.createError = undefined;
    const retry = await submit({
      idempotencyKey: 'k-bad-summary',
      summary: { title: ' ', body: '', fields: [] },
    });
    expect(retry.replayed).toBe(false);
    expect(retry.tx.status).toBe('awaiting_approval');
  });

  it("a summary refusal whose detail names the field names it once in the row's reason", async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    approvals.createError = new CustosError('invalid_argument', {
      detail: 'summary.title is required',
      field: 'summary.title',
    });
    const err = await refusal(submit({ summary: { title: ' ', body: '', fields: [] } }));
    expect(err).toMatchObject({ kind: 'invalid_argument', field: 'summary.title' });
    const rows = await pool.query('SELECT status, error_message FROM signer.transactions WHERE key_id = $1', [
      scope.key.id,
    ]);
    expect(rows.rows).toEqual([
      { status: 'failed', error_message: 'the approval could not be requested: summary.title is required' },
    ]);
  });

  it('the approval created but not recordable on the row (the database refuses): failed naming the approval id, not "approvals unavailable"; the key given back', async () => {
    const w = await funded();
    const lines: string[] = [];
    const captured = createLogger({
      service: 'signer-test',
      level: 'warn',
      destination: { write: (l: string) => void lines.push(l) },
    });
    const { submit, approvals, scope } = rig(w, { logger: captured });
    // The database refuses to name the approval on this one row (as an outage of it would).
    approvals.afterCreate = async (r) => {
      await pool.query(`CREATE OR REPLACE FUNCTION signer.f4_refuse_approval() RETURNS trigger AS $$
        BEGIN
          IF NEW.approval_id IS NOT NULL AND NEW.id = '${r.targetId}'::uuid THEN
            RAISE EXCEPTION 'refused by test';
          END IF;
          RETURN NEW;
        END $$ LANGUAGE plpgsql`);
      await pool.query(`CREATE TRIGGER f4_refuse_approval BEFORE UPDATE ON signer.transactions
        FOR EACH ROW EXECUTE FUNCTION signer.f4_refuse_approval()`);
    };
    try {
      const err = await refusal(submit({ idempotencyKey: 'k-orphan' }));
      expect(err.kind).toBe('unavailable');
      expect(err.detail).not.toMatch(/approvals service unavailable/);
    } finally {
      await pool.query('DROP TRIGGER IF EXISTS f4_refuse_approval ON signer.transactions');
      await pool.query('DROP FUNCTION IF EXISTS signer.f4_refuse_approval()');
    }
    const created = approvals.created.at(-1)!;
    const rows = await pool.query(
      'SELECT id, status, error_message, approval_id FROM signer.transactions WHERE key_id = $1',
      [scope.key.id],
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]).toMatchObject({ id: created.targetId, status: 'failed', approval_id: null });
    expect(rows.rows[0].error_message).toMatch(
      /^approval [0-9a-f-]{36} was created but could not be recorded/,
    );
    expect(rows.rows[0].error_message).not.toMatch(/unavailable/);
    // The orphan approval is logged at error level with its id.
    const orphan = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['approval_id']);
    expect(orphan).toMatchObject({ level: 'error', tx_id: created.targetId });
    expect(rows.rows[0].error_message).toContain(String(orphan!['approval_id']));
    // The key was given back: a retry runs anew.
    approvals.afterCreate = undefined;
    const retry = await submit({ idempotencyKey: 'k-orphan' });
    expect(retry.replayed).toBe(false);
    expect(retry.tx.status).toBe('awaiting_approval');
    expect(await sentBy(w)).toBe(0);
  });

  it('the row ended while its approval was being created (found abandoned): refused, not answered as held', async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    approvals.afterCreate = async (r) => {
      await pool.query(
        `UPDATE signer.transactions SET status = 'failed', error_message = 'x' WHERE id = $1`,
        [r.targetId],
      );
    };
    const err = await refusal(submit());
    expect(err.kind).toBe('unavailable');
    const rows = await pool.query('SELECT status, approval_id FROM signer.transactions WHERE key_id = $1', [
      scope.key.id,
    ]);
    expect(rows.rows).toEqual([{ status: 'failed', approval_id: null }]);
  });

  it('CreateApproval refusing anything else (a too-big preview): 500 internal, not 503; the row failed', async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    approvals.createError = new CustosError('invalid_argument', {
      detail: 'is more than 262144 bytes',
      field: 'preview',
    });
    const err = await refusal(submit());
    expect(err.kind).toBe('internal');
    expect(err.field).toBeUndefined();
    const rows = await pool.query('SELECT status FROM signer.transactions WHERE key_id = $1', [scope.key.id]);
    expect(rows.rows).toEqual([{ status: 'failed' }]);
    expect(await sentBy(w)).toBe(0);
  });

  it('Idempotency-Key replayed while the hold is asking for its approval: 409 running, not an answer without approval_id', async () => {
    const w = await funded();
    const { submit, approvals, scope } = rig(w);
    let release!: () => void;
    approvals.createGate = new Promise<void>((r) => (release = r));
    const first = submit({ idempotencyKey: 'k-slow-create' });
    // CreateApproval is asked once the row is recorded (awaiting_approval, no approval id yet)
    while (approvals.asked === 0) await new Promise((x) => setTimeout(x, 10));
    expect(
      await row(
        (await pool.query('SELECT id FROM signer.transactions WHERE key_id = $1', [scope.key.id])).rows[0].id,
      ),
    ).toMatchObject({
      status: 'awaiting_approval',
      approval_id: null,
    });
    const err = await refusal(submit({ idempotencyKey: 'k-slow-create' }));
    expect(err).toMatchObject({ kind: 'conflict', field: 'Idempotency-Key' });
    release();
    const held = await first;
    expect(held.tx).toMatchObject({ status: 'awaiting_approval' });
    expect(held.tx.approvalId).toBeTruthy();
    const replay = await submit({ idempotencyKey: 'k-slow-create' });
    expect(replay.replayed).toBe(true);
    expect(replay.tx.approvalId).toBe(held.tx.approvalId);
    expect(approvals.created).toHaveLength(1);
  });

  it('Idempotency-Key: the hold replays as awaiting; a resume with its own key answers its first result on repeat, consuming once', async () => {
    const w = await funded();
    const { submit, approvals } = rig(w);
    const held = await submit({ idempotencyKey: 'hold-1' });
    const replay = await submit({ idempotencyKey: 'hold-1' });
    expect(replay).toMatchObject({ replayed: true, tx: { id: held.tx.id, status: 'awaiting_approval' } });
    expect(approvals.created).toHaveLength(1);
    const r1 = await submit({ idempotencyKey: 'resume-1', resumeTxId: held.tx.id });
    const r2 = await submit({ idempotencyKey: 'resume-1', resumeTxId: held.tx.id });
    expect(r1.tx).toMatchObject({ id: held.tx.id, status: 'broadcast' });
    expect(r2).toMatchObject({ replayed: true, tx: { id: held.tx.id, txHash: r1.tx.txHash } });
    expect(approvals.consumed).toHaveLength(1);
    expect(await sentBy(w)).toBe(1);
  });

  it('parallel resumes (the peer accepts one consume): one broadcast, the others 403, one transaction on chain', async () => {
    const w = await funded();
    const { submit, approvals } = rig(w);
    const held = await submit();
    approvals.mode = 'once';
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, () => submit({ resumeTxId: held.tx.id })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter(
      (r) => r.status === 'rejected' && (r.reason as CustosError).type === 'approval_required',
    );
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(11);
    expect(await sentBy(w)).toBe(1);
    expect(await row(held.tx.id)).toMatchObject({ status: 'broadcast', nonce: '0' });
  });

  it('the watcher and recovery ignore awaiting rows; the in-flight checks do not count them', async () => {
    const w = await funded();
    const { submit, scope } = rig(w);
    const held = await submit();
    const wt = new TxWatcher(
      { store, chains: { resolve: async () => ({ ...scope.chain }) } as never, rpc: rpcPool, logger },
      { intervalMs: 20, batch: 50, staleMs: 0, rpcTimeoutMs: RPC_TIMEOUT },
    );
    await pool.query("UPDATE signer.transactions SET created_at = now() - interval '1 day' WHERE id = $1", [
      held.tx.id,
    ]);
    await wt.recover();
    await wt.round();
    expect(await row(held.tx.id)).toMatchObject({ status: 'awaiting_approval', nonce: null });
    expect(await store.leaseStale('pending', 0, 100, 1000)).not.toContainEqual(
      expect.objectContaining({ id: held.tx.id }),
    );
    expect(await store.leaseForWatch(100, 1000)).not.toContainEqual(
      expect.objectContaining({ id: held.tx.id }),
    );
    // The in-flight spend check (non-EVM transfers) does not count the held value.
    const spent = await store.insertTransfer(
      {
        id: randomUUID(),
        orgId: held.tx.orgId,
        agentId: held.tx.agentId,
        keyId: held.tx.keyId,
        chainName: held.tx.chainName,
        chainId: held.tx.chainId,
        fromAddress: w.address,
        toAddress: w.address,
        valueWei: '10',
        txType: 0,
      },
      undefined,
      [],
      undefined,
      { native: 10n, available: { native: 10n } },
    );
    expect(spent.status).toBe('pending');
    await pool.query("UPDATE signer.transactions SET status = 'failed' WHERE id = $1", [spent.id]);
    // A resumed row a day after its hold is as young as its resume: recovery leaves it to its request.
    const other = await submit();
    await pool.query(
      "UPDATE signer.transactions SET status = 'pending', created_at = now() - interval '1 day', resumed_at = now() WHERE id = $1",
      [other.tx.id],
    );
    const stale = async () => (await store.leaseStale('pending', 60_000, 100, 1)).map((t) => t.id);
    expect(await stale()).not.toContain(other.tx.id);
    await pool.query('UPDATE signer.transactions SET resumed_at = NULL WHERE id = $1', [other.tx.id]);
    expect(await stale()).toContain(other.tx.id);
    await pool.query("UPDATE signer.transactions SET status = 'failed' WHERE id = $1", [other.tx.id]);
    const r = await submit({ resumeTxId: held.tx.id });
    expect(r.tx.status).toBe('broadcast');
    const resumed = await pool.query('SELECT resumed_at FROM signer.transactions WHERE id = $1', [
      held.tx.id,
    ]);
    expect(resumed.rows[0].resumed_at).toBeInstanceOf(Date);
  });

  it('an ERC-20 transfer is held by an erc20_amount_above rule (amount decoded from the call data)', async () => {
    const w = await funded();
    const { submit } = rig(w, {
      rules: [
        {
          conditions: [cond({ type: 'erc20_amount_above', thresholdRaw: '999' })],
          riskTier: 3,
          skipWhen: [],
          requireWhen: [],
        },
      ],
    });
    const call = (amount: bigint) =>
      keccakId('transfer(address,uint256)').slice(0, 10) +
      AbiCoder.defaultAbiCoder()
        .encode(['address', 'uint256'], [Wallet.createRandom().address, amount])
        .slice(2);
    // A contract that accepts any call: anvil's precompile-free random address (no code) accepts it.
    const small = await submit({ value: '0', data: call(999n) });
    expect(small.tx.status).toBe('broadcast');
    const big = await submit({ value: '0', data: call(1000n) });
    expect(big.tx.status).toBe('awaiting_approval');
    // Bytes after the arguments do not hide the amount (Solidity ignores them; the token moves).
    const padded = await submit({ value: '0', data: `${call(10n ** 24n)}00` });
    expect(padded.tx.status).toBe('awaiting_approval');
    // A transfer whose amount cannot be read is held (fails closed), whatever the threshold.
    const cut = await submit({ value: '0', data: call(1n).slice(0, 60) });
    expect(cut.tx.status).toBe('awaiting_approval');
    expect(await sentBy(w)).toBe(1);
  });

  it('no approval gate wired: a matching rule is 503 with nothing recorded or sent (never skipped)', async () => {
    const w = await funded();
    const { submit, scope } = rig(w, { noGate: true });
    const err = await refusal(submit());
    expect(err.kind).toBe('unavailable');
    const rows = await pool.query('SELECT 1 FROM signer.transactions WHERE agent_id = $1', [
      scope.agent.agentId,
    ]);
    expect(rows.rowCount).toBe(0);
    expect(await sentBy(w)).toBe(0);
    // no rule matches: submitted as before
    expect((await submit({ value: '1000' })).tx.status).toBe('broadcast');
  });

  it('a Solana token transfer is held with no native value; the preview and payload name the token and amount', async () => {
    const w = Wallet.createRandom();
    const sol = generateSolana();
    const to = generateSolana().address;
    const mint = generateSolana().address;
    const { submit, approvals } = rig(w, {
      rules: [
        {
          conditions: [cond({ type: 'erc20_amount_above', thresholdRaw: '1000' })],
          riskTier: 2,
          skipWhen: [],
          requireWhen: [],
        },
      ],
      scope: {
        chain: {
          name: 'solana-devnet',
          chainId: 0n,
          family: 'solana',
          nativeDecimals: 9,
          nativeCurrency: 'SOL',
          isTestnet: true,
          isEnabled: true,
          rpcUrl: '',
        },
        adapter: solanaAdapter,
        key: {
          id: randomUUID(),
          address: sol.address,
          publicKey: sol.publicKey,
          keyVersion: 1,
          custody: 'server',
        },
      } as unknown as Partial<IntentScope>,
    });
    const r = await submit({ chain: 'solana-devnet', to, value: '2.5', tokenMint: mint });
    expect(r.tx.status).toBe('awaiting_approval');
    expect((await row(r.tx.id)).status).toBe('awaiting_approval');
    const c = approvals.created[0]!;
    expect(c.payload).toMatchObject({ chain: 'solana-devnet', to, value: '2.5', token_mint: mint });
    expect(c.preview).toMatchObject({
      from: sol.address,
      to,
      value_wei: '0',
      value: '0',
      token_transfer: { token: mint, recipient: to, amount_raw: '2500000', decimals: 6, amount: '2.5' },
    });
  });
});
