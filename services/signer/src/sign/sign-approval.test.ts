import { createHash, randomUUID } from 'node:crypto';
import type { AuditRecordInput } from '@custos/events';
import type {
  Approval,
  ConsumeApprovalRequest,
  CreateApprovalRequest,
} from '@custos/proto/custos/approvals/v1/messages';
import type { ApprovalRule } from '@custos/proto/custos/identity/v1/agents';
import { CustosError, type Logger, canonicalJson } from '@custos/service-kit';
import { Transaction, Wallet, hashMessage, hexlify, toUtf8Bytes, verifyMessage } from 'ethers';
import { ApprovalGate } from '../approvals/approval-gate.js';
import type { EvmRpc } from '../evm/evm-rpc.js';
import type { IntentContext, IntentScope } from '../intents/intent-context.js';
import { type Approvals, approvalRequired } from '../peers/approvals-client.js';
import { SignService } from './sign-service.js';
import { signResponseOf } from './sign-grpc.js';
import type { SignOnlyTxRow, SignStore } from './sign-store.js';
import type { SignBudget, SignIntentInput } from './sign-types.js';
import { solanaAdapter } from '../adapters/solana/index.js';
import { generateSolana } from '../adapters/solana/solana-keys.js';
import { tronAdapter } from '../adapters/tron/index.js';
import { generateTron } from '../adapters/tron/tron-keys.js';
import type { ChainAdapter, PreparedTransfer, TransferInput } from '../keys/chain-adapter.js';

// The approval gate of sign intents (issue 19), SignService with its edges faked (key, store, chain,
// and the approvals peer): a matching rule answers awaiting_approval with nothing signed; a resume
// with approval_id consumes it for the sha256 of the canonical body, then signs; a refusal is 403.

const PK = Buffer.from('4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318', 'hex');
const ADDRESS = new Wallet(`0x${PK.toString('hex')}`).address;
const AGENT = '11111111-1111-4111-8111-111111111111';
const ORG = '22222222-2222-4222-8222-222222222222';
const TO = '0x000000000000000000000000000000000000dEaD';
const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;

const cond = (c: Record<string, unknown>) => ({
  chains: [],
  addresses: [],
  selectors: [],
  intentTypes: [],
  actions: [],
  actionKinds: [],
  ...c,
});
const rule = (conditions: ReturnType<typeof cond>[], riskTier = 1): ApprovalRule => ({
  conditions,
  riskTier,
  skipWhen: [],
  requireWhen: [],
});

/**
 * The approvals peer as far as signer sees it: CreateApproval records the request; ConsumeApproval
 * accepts only an approval it created, for the same org, agent, action and target (as approvals'
 * conditional update does), so a resume that names another target is refused here too.
 */
class FakeApprovals implements Approvals {
  created: CreateApprovalRequest[] = [];
  consumed: ConsumeApprovalRequest[] = [];
  refuse = false;
  createError: CustosError | undefined;
  private byId = new Map<string, CreateApprovalRequest>();
  async create(r: CreateApprovalRequest): Promise<Approval> {
    if (this.createError) throw this.createError;
    this.created.push(r);
    const id = randomUUID();
    this.byId.set(id, r);
    return { id } as Approval;
  }
  async consume(r: ConsumeApprovalRequest): Promise<Approval> {
    this.consumed.push(r);
    if (this.refuse) throw approvalRequired('the approval is not approved', r.approvalId);
    const c = this.byId.get(r.approvalId);
    const same =
      c &&
      c.orgId === r.orgId &&
      c.agentId === r.agentId &&
      c.action === r.action &&
      c.targetType === r.targetType &&
      c.targetId === r.targetId;
    if (!same) throw approvalRequired('the approval is not for this target', r.approvalId);
    return { id: r.approvalId } as Approval;
  }
}

function rig(
  rules: ApprovalRule[],
  o: { scope?: Partial<IntentScope>; gate?: boolean; privateKey?: Buffer } = {},
) {
  const scope = {
    agent: { kind: 'agent', agentId: AGENT, orgId: ORG, intentsApiEnabled: true },
    settings: {
      messageSigningEnabled: true,
      rawSigningEnabled: true,
      createdBy: 'c0ffee00-0000-4000-8000-000000000000',
      actionApprovalPolicy: { rules },
    },
    chain: { name: 'anvil', chainId: 31337n, family: 'evm', nativeDecimals: 18, rpcUrl: '' },
    key: { id: '33333333-3333-4333-8333-333333333333', address: ADDRESS, keyVersion: 1, custody: 'server' },
    ...o.scope,
  } as unknown as IntentScope;
  const audits: AuditRecordInput[] = [];
  const rows: SignOnlyTxRow[] = [];
  let loads = 0;
  const intents = {
    audited: (_p: unknown, _a: string, _id: string, step: () => Promise<unknown>) => step(),
    open: async () => scope,
    loader: {
      withKey: async (_k: unknown, fn: (pk: Buffer) => unknown) => {
        loads++;
        return fn(Buffer.from(o.privateKey ?? PK));
      },
    },
  } as unknown as IntentContext;
  const store = {
    async nextNonce() {
      return undefined;
    },
    async recordSignature(r: AuditRecordInput) {
      audits.push(r);
    },
    async recordSignOnly(row: SignOnlyTxRow, r: AuditRecordInput) {
      rows.push(row);
      audits.push(r);
    },
  } as unknown as SignStore;
  const rpc: EvmRpc = {
    feeData: async () => ({ maxFeePerGas: 3n, maxPriorityFeePerGas: 1n, gasPrice: 2n }),
    estimateGas: async () => 21000n,
    call: async () => ({ ok: true, data: '0x' }),
    pendingNonce: async () => 4,
    sendRawTransaction: async () => {
      throw new Error('never');
    },
    receipt: async () => null,
  };
  const approvals = new FakeApprovals();
  const gate = new ApprovalGate({ approvals, logger });
  const service = new SignService({
    intents,
    store,
    rpc: { forChain: () => rpc },
    logger,
    inputs: { inputsInUse: async () => new Set<string>() },
    ...(o.gate === false ? {} : { gate }),
  });
  const sign = (input: Partial<SignIntentInput>, budget?: SignBudget) => {
    const full = {
      agentId: AGENT,
      chain: scope.chain.name,
      intentType: 'personal_sign',
      ...input,
    } as SignIntentInput;
    // As the gateway sends it: the canonical JSON of the body without approval_id.
    const { agentId: _a, approvalId: _b, ...body } = full;
    full.canonicalBody = canonicalJson({ ...body, intent_type: full.intentType });
    return service.sign(scope.agent, full, budget);
  };
  return { sign, approvals, audits, rows, loads: () => loads };
}

const MESSAGE = hexlify(toUtf8Bytes('pay 5 to bob'));
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('SignService approval gate', () => {
  it('a matching rule (intent_type_in): awaiting_approval with the approval id, nothing signed, audited', async () => {
    const r = rig([rule([cond({ type: 'intent_type_in', intentTypes: ['personal_sign'] })], 2)]);
    const out = await r.sign({ message: MESSAGE, summary: { title: 'Sign for bob', body: '', fields: [] } });
    expect(out).toMatchObject({
      status: 'awaiting_approval',
      signature: '',
      intentType: 'personal_sign',
      from: ADDRESS,
    });
    expect(out.approvalId).toMatch(/^[0-9a-f-]{36}$/);
    expect(signResponseOf(out)).toMatchObject({
      status: 'awaiting_approval',
      approvalId: out.approvalId,
      signature: '',
    });
    expect(r.loads()).toBe(0);
    expect(r.approvals.created).toHaveLength(1);
    expect(r.approvals.created[0]).toMatchObject({
      orgId: ORG,
      agentId: AGENT,
      action: 'agent_sign_intent',
      targetType: 'sign_intent',
      riskTier: 2,
      summary: { title: 'Sign for bob' },
    });
    expect(r.approvals.created[0]!.targetId).toMatch(/^[0-9a-f]{64}$/);
    // The approver sees what would be signed: the message's text and hash, the rule and tier.
    expect(r.approvals.created[0]!.preview).toMatchObject({
      intent_type: 'personal_sign',
      from: ADDRESS,
      message_text: 'pay 5 to bob',
      message_hash: hashMessage('pay 5 to bob'),
      risk_tier: 2,
      rule: { risk_tier: 2 },
    });
    expect(r.audits.map((a) => a.action)).toEqual(['agent.sign.awaiting_approval']);
    expect(r.audits[0]!.metadata).toMatchObject({ approval_id: out.approvalId, risk_tier: 2 });
  });

  it('no matching rule: signed as before, no approval asked', async () => {
    const r = rig([rule([cond({ type: 'intent_type_in', intentTypes: ['typed_data'] })])]);
    const out = await r.sign({ message: MESSAGE });
    expect(verifyMessage('pay 5 to bob', out.signature)).toBe(ADDRESS);
    expect(r.approvals.created).toHaveLength(0);
    expect(r.approvals.consumed).toHaveLength(0);
  });

  it('resume with approval_id: consumed for the same target (sha256 of the canonical body), then signed and audited with it', async () => {
    const r = rig([rule([cond({ type: 'always' })])]);
    const held = await r.sign({ message: MESSAGE });
    const target = r.approvals.created[0]!.targetId;
    const out = await r.sign({ message: MESSAGE, approvalId: held.approvalId! });
    expect(verifyMessage('pay 5 to bob', out.signature)).toBe(ADDRESS);
    expect(out.approvalId).toBe(held.approvalId);
    expect(r.approvals.consumed).toEqual([
      {
        approvalId: held.approvalId,
        orgId: ORG,
        agentId: AGENT,
        action: 'agent_sign_intent',
        targetType: 'sign_intent',
        targetId: target,
      },
    ]);
    expect(r.approvals.created).toHaveLength(1); // the rule is not evaluated again
    expect(r.audits.at(-1)).toMatchObject({
      action: 'agent.sign.personal_sign',
      metadata: { approval_id: held.approvalId },
    });
  });

  it('a different body on resume names another target; a refused consume is 403 approval_required and nothing is signed', async () => {
    const r = rig([rule([cond({ type: 'always' })])]);
    const held = await r.sign({ message: MESSAGE });
    r.approvals.refuse = true;
    const err = await r
      .sign({ message: hexlify(toUtf8Bytes('pay 500 to eve')), approvalId: held.approvalId! })
      .then(
        () => undefined,
        (e: unknown) => e as CustosError,
      );
    expect(err).toBeInstanceOf(CustosError);
    expect(err).toMatchObject({ kind: 'permission_denied', type: 'approval_required' });
    expect(err!.extensions).toEqual({ approval_request_id: held.approvalId });
    expect(r.approvals.consumed[0]!.targetId).not.toBe(r.approvals.created[0]!.targetId);
    expect(r.loads()).toBe(0);
    expect(r.audits.map((a) => a.action)).toEqual(['agent.sign.awaiting_approval']);
    // a malformed approval id never reaches the peer
    const bad = await r
      .sign({ message: MESSAGE, approvalId: 'nope' })
      .catch((e: unknown) => e as CustosError);
    expect(bad).toMatchObject({ type: 'approval_required' });
    expect(r.approvals.consumed).toHaveLength(1);
  });

  it('transaction intents: facts of the transaction (value_above) decide, the preview names the transaction; the resume signs it', async () => {
    const r = rig([rule([cond({ type: 'value_above', thresholdWei: '1000' })], 3)]);
    const small = await r.sign({ intentType: 'transaction', to: TO, value: '1000', gasLimit: '21000' });
    expect(small.status).toBe('sign_only');
    const body = { intentType: 'transaction', to: TO, value: '1001', gasLimit: '21000' };
    const held = await r.sign(body);
    expect(held).toMatchObject({ status: 'awaiting_approval', signedTx: null });
    expect(r.rows).toHaveLength(1);
    expect(r.approvals.created[0]).toMatchObject({ riskTier: 3 });
    expect(r.approvals.created[0]!.preview).toMatchObject({ to: TO, value_wei: '1001', from: ADDRESS });
    const out = await r.sign({ ...body, approvalId: held.approvalId! });
    expect(out.status).toBe('sign_only');
    expect(Transaction.from(out.signedTx!).value).toBe(1001n);
    expect(r.approvals.consumed[0]!.targetId).toBe(r.approvals.created[0]!.targetId);
    expect(r.approvals.consumed[0]!.targetId).toBe(
      sha(
        canonicalJson({
          chain: 'anvil',
          gasLimit: '21000',
          intentType: 'transaction',
          intent_type: 'transaction',
          to: TO,
          value: '1001',
        }),
      ),
    );
  });

  it('no approval gate wired: a matching rule is 503 and nothing is signed (never skipped)', async () => {
    const r = rig([rule([cond({ type: 'always' })])], { gate: false });
    const err = await r.sign({ message: MESSAGE }).catch((e: unknown) => e as CustosError);
    expect(err).toBeInstanceOf(CustosError);
    expect(err).toMatchObject({ kind: 'unavailable' });
    expect(r.loads()).toBe(0);
    expect(r.audits).toEqual([]);
    // no rule matches: signed as before
    const free = rig([rule([cond({ type: 'intent_type_in', intentTypes: ['typed_data'] })])], {
      gate: false,
    });
    expect(verifyMessage('pay 5 to bob', (await free.sign({ message: MESSAGE })).signature)).toBe(ADDRESS);
  });

  it('a resume whose caller has run out of time is 503 before the approval is used (it stays usable)', async () => {
    const r = rig([rule([cond({ type: 'always' })])]);
    const held = await r.sign({ message: MESSAGE });
    const late = { deadline: Date.now() - 1, cancelled: () => false } as SignBudget;
    const err = await r
      .sign({ message: MESSAGE, approvalId: held.approvalId! }, late)
      .catch((e: unknown) => e as CustosError);
    expect(err).toMatchObject({ kind: 'unavailable' });
    expect(r.approvals.consumed).toHaveLength(0);
    expect(r.loads()).toBe(0);
    const out = await r.sign({ message: MESSAGE, approvalId: held.approvalId! });
    expect(verifyMessage('pay 5 to bob', out.signature)).toBe(ADDRESS);
  });

  it('CreateApproval refusing the summary is 400 naming its field; refusing the preview is 500; nothing signed', async () => {
    const r = rig([rule([cond({ type: 'always' })])]);
    r.approvals.createError = new CustosError('invalid_argument', {
      detail: 'must not be blank',
      field: 'summary.title',
    });
    const bad = await r.sign({ message: MESSAGE }).catch((e: unknown) => e as CustosError);
    expect(bad).toMatchObject({ kind: 'invalid_argument', field: 'summary.title' });
    r.approvals.createError = new CustosError('invalid_argument', { detail: 'too big', field: 'preview' });
    const big = await r.sign({ message: MESSAGE }).catch((e: unknown) => e as CustosError);
    expect(big).toMatchObject({ kind: 'internal' });
    r.approvals.createError = new CustosError('unavailable', { detail: 'down' });
    const down = await r.sign({ message: MESSAGE }).catch((e: unknown) => e as CustosError);
    expect(down).toMatchObject({ kind: 'unavailable' });
    expect(r.loads()).toBe(0);
    expect(r.audits).toEqual([]);
  });

  it('message_text shows bidi overrides and zero-width characters as visible markers, and says it was altered', async () => {
    const r = rig([rule([cond({ type: 'always' })])]);
    const tricky = 'pay 5 to \u202Eevil\u202C bob\u200B\u2066x\u2069\uFEFF';
    await r.sign({ message: hexlify(toUtf8Bytes(tricky)) });
    expect(r.approvals.created[0]!.preview).toMatchObject({
      message_text: 'pay 5 to ⟨U+202E⟩evil⟨U+202C⟩ bob⟨U+200B⟩⟨U+2066⟩x⟨U+2069⟩⟨U+FEFF⟩',
      message_text_altered: true,
    });
  });

  it('message_text marks tag characters, the soft hyphen, C1 controls, CGJ and MVS too; a plain text is not altered', async () => {
    const r = rig([rule([cond({ type: 'always' })])]);
    const tricky = 'send\u00AD all to \u{E0041}bob\u0085\u034F\u180E\uFEFF';
    await r.sign({ message: hexlify(toUtf8Bytes(tricky)) });
    expect(r.approvals.created[0]!.preview).toMatchObject({
      message_text: 'send⟨U+00AD⟩ all to ⟨U+E0041⟩bob⟨U+0085⟩⟨U+034F⟩⟨U+180E⟩⟨U+FEFF⟩',
      message_text_altered: true,
    });
    // A leading BOM is shown too (not dropped by the decoder).
    await r.sign({ message: hexlify(toUtf8Bytes('\uFEFFhi')) });
    expect(r.approvals.created[1]!.preview).toMatchObject({
      message_text: '⟨U+FEFF⟩hi',
      message_text_altered: true,
    });
    await r.sign({ message: hexlify(toUtf8Bytes('pay 5 to bob')) });
    expect(r.approvals.created[2]!.preview).toMatchObject({ message_text: 'pay 5 to bob' });
    expect(r.approvals.created[2]!.preview).not.toHaveProperty('message_text_altered');
  });
});

/** A non-EVM chain's real adapter (its parse) with a fake node: prepare answers without a chain. */
function withFakeNode(adapter: ChainAdapter): ChainAdapter {
  const t = adapter.transfers!;
  return {
    ...adapter,
    transfers: {
      ...t,
      prepare: async (_ctx, input: TransferInput): Promise<PreparedTransfer> => ({
        unsigned: {},
        to: input.to,
        value: 1n,
        fee: 5000n,
        inputs: [],
        details: {},
      }),
      sign: () => ({ signedTx: 'signed', txHash: 'hash' }),
    },
  };
}

describe('SignService approval gate on non-EVM chains (sign-only transfers)', () => {
  const sol = generateSolana();
  const solScope = {
    chain: {
      name: 'solana-devnet',
      chainId: 0n,
      family: 'solana',
      nativeDecimals: 9,
      nativeCurrency: 'SOL',
      isTestnet: true,
      rpcUrl: 'http://127.0.0.1:9',
    },
    adapter: withFakeNode(solanaAdapter),
    key: { id: '44444444-4444-4444-8444-444444444444', address: sol.address, publicKey: sol.publicKey },
  } as unknown as Partial<IntentScope>;
  const tron = generateTron();
  const tronScope = {
    chain: {
      name: 'tron-nile',
      chainId: 0n,
      family: 'tron',
      nativeDecimals: 6,
      nativeCurrency: 'TRX',
      isTestnet: true,
      rpcUrl: 'http://127.0.0.1:9',
    },
    adapter: withFakeNode(tronAdapter),
    key: { id: '55555555-5555-4555-8555-555555555555', address: tron.address, publicKey: tron.publicKey },
  } as unknown as Partial<IntentScope>;
  const amountAbove = rule([cond({ type: 'erc20_amount_above', thresholdRaw: '1000000000' })], 2);

  it('Solana: a token transfer without token_decimals is held by erc20_amount_above (the parse fills the decimals)', async () => {
    const r = rig([amountAbove], { scope: solScope, privateKey: sol.privateKey });
    const to = generateSolana().address;
    const mint = generateSolana().address;
    // 2,000.5 tokens (a decimal amount) of the default 6 decimals: 2,000,500,000 base units, above it.
    const out = await r.sign({ intentType: 'transaction', to, value: '2000.5', tokenMint: mint });
    expect(out).toMatchObject({ status: 'awaiting_approval', signedTx: null });
    expect(r.rows).toHaveLength(0);
    expect(r.approvals.created).toHaveLength(1);
    const c = r.approvals.created[0]!;
    // The approver sees the transfer: recipient, the token and its amount, no native value.
    expect(c.payload).toMatchObject({ to, value: '2000.5', token_mint: mint });
    expect(c.preview).toMatchObject({
      chain: 'solana-devnet',
      from: sol.address,
      to,
      value_wei: '0',
      token_transfer: {
        token: mint,
        recipient: to,
        amount_raw: '2000500000',
        decimals: 6,
        amount: '2000.5',
      },
    });
    // 1 base unit of it is not held
    const small = await r.sign({ intentType: 'transaction', to, value: '1', tokenMint: mint });
    expect(small.status).toBe('sign_only');
  });

  it('Solana: a native transfer shows its recipient and value to the approver', async () => {
    const r = rig([rule([cond({ type: 'value_above', thresholdWei: '1000000000' })], 1)], {
      scope: solScope,
      privateKey: sol.privateKey,
    });
    const to = generateSolana().address;
    const out = await r.sign({ intentType: 'transaction', to, value: '1.5' });
    expect(out.status).toBe('awaiting_approval');
    const c = r.approvals.created[0]!;
    expect(c.payload).toMatchObject({ to, value: '1.5' });
    expect(c.payload).not.toHaveProperty('token_mint');
    expect(c.preview).toMatchObject({
      from: sol.address,
      to,
      value_wei: '1500000000',
      value: '1.5',
      symbol: 'SOL',
      token_transfer: null,
    });
  });

  it('Tron: a TRC-20 transfer of a decimal amount without token_decimals is held (its amount cannot be known)', async () => {
    const r = rig([rule([cond({ type: 'erc20_amount_above', thresholdRaw: '1000000000000000' })], 2)], {
      scope: tronScope,
      privateKey: tron.privateKey,
    });
    const to = generateTron().address;
    const token = generateTron().address;
    const out = await r.sign({ intentType: 'transaction', to, value: '1.5', tokenMint: token });
    expect(out.status).toBe('awaiting_approval');
    expect(r.approvals.created[0]!.preview).toMatchObject({
      value_wei: '0',
      token_transfer: { token, recipient: to, amount_raw: null },
    });
    expect(r.approvals.created[0]!.payload).toMatchObject({ to, value: '1.5', token_mint: token });
    // base units are known without decimals: below the threshold, signed
    const small = await r.sign({ intentType: 'transaction', to, value: '15', tokenMint: token });
    expect(small.status).toBe('sign_only');
  });
});
