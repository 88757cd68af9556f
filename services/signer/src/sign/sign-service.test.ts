import type { AuditRecordInput } from '@custos/events';
import { CustosError, type Logger } from '@custos/service-kit';
import { Transaction, Wallet, hexlify, toUtf8Bytes, verifyMessage } from 'ethers';
import type { EvmRpc } from '../evm/evm-rpc.js';
import { EvmRpcError } from '../evm/evm-rpc.js';
import type { IntentContext, IntentScope } from '../intents/intent-context.js';
import { RECORD_MARGIN_MS, SignService } from './sign-service.js';
import type { SignOnlyTxRow, SignStore } from './sign-store.js';
import type { SignBudget, SignIntentInput } from './sign-types.js';

// SignService with its dependencies faked at their edges (the Intents API checks pass, the key is a
// known one): what is audited, what is answered, and that nothing is answered when the record fails.

const PK = Buffer.from('4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318', 'hex');
const PK_HEX = PK.toString('hex');
const ADDRESS = new Wallet(`0x${PK_HEX}`).address;
const AGENT = '11111111-1111-4111-8111-111111111111';
const TO = '0x000000000000000000000000000000000000dEaD';

const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;

function scope(settings: Record<string, unknown> = {}): IntentScope {
  return {
    agent: {
      kind: 'agent',
      agentId: AGENT,
      orgId: '22222222-2222-4222-8222-222222222222',
      intentsApiEnabled: true,
    },
    settings: { messageSigningEnabled: true, rawSigningEnabled: false, ...settings },
    chain: { name: 'anvil', chainId: 31337n, family: 'evm', nativeDecimals: 18, rpcUrl: 'http://x' },
    key: { id: '33333333-3333-4333-8333-333333333333', address: ADDRESS, keyVersion: 1, custody: 'server' },
  } as unknown as IntentScope;
}

function rig(
  opts: {
    settings?: Record<string, unknown>;
    failRecord?: boolean;
    rpc?: Partial<EvmRpc>;
    storedNext?: number;
  } = {},
) {
  const audits: AuditRecordInput[] = [];
  const rows: SignOnlyTxRow[] = [];
  let loads = 0;
  const rpcCalls: string[] = [];
  const intents = {
    audited: (_p: unknown, _a: string, _id: string, step: () => Promise<unknown>) => step(),
    open: async () => scope(opts.settings),
    loader: {
      withKey: async (_k: unknown, fn: (pk: Buffer) => unknown) => {
        loads++;
        return fn(Buffer.from(PK));
      },
    },
  } as unknown as IntentContext;
  const store = {
    async nextNonce() {
      return opts.storedNext;
    },
    async recordSignature(r: AuditRecordInput) {
      if (opts.failRecord) throw new Error('outbox is gone');
      audits.push(r);
    },
    async recordSignOnly(row: SignOnlyTxRow, r: AuditRecordInput) {
      if (opts.failRecord) throw new Error('outbox is gone');
      rows.push(row);
      audits.push(r);
    },
  } as unknown as SignStore;
  const fake: EvmRpc = {
    feeData: async () => {
      rpcCalls.push('feeData');
      return { maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n, gasPrice: 2_000_000_000n };
    },
    estimateGas: async () => {
      rpcCalls.push('estimateGas');
      return 21000n;
    },
    call: async () => ({ ok: true, data: '0x' }),
    pendingNonce: async () => {
      rpcCalls.push('pendingNonce');
      return 9;
    },
    sendRawTransaction: async () => {
      throw new Error('never');
    },
    receipt: async () => null,
    ...opts.rpc,
  };
  const service = new SignService({ intents, store, rpc: { forChain: () => fake }, logger });
  const p = scope().agent;
  const sign = (input: Partial<SignIntentInput>, budget?: SignBudget) =>
    service.sign(p, { agentId: AGENT, chain: 'anvil', intentType: 'personal_sign', ...input }, budget);
  return { sign, audits, rows, rpcCalls, loads: () => loads };
}

describe('SignService', () => {
  it('personal_sign: answers a signature of the key, audited with the hash and never the message or key', async () => {
    const r = rig();
    const text = 'canary-message-text';
    const out = await r.sign({ message: hexlify(toUtf8Bytes(text)) });
    expect(verifyMessage(text, out.signature)).toBe(ADDRESS);
    expect(r.audits).toHaveLength(1);
    expect(r.audits[0]).toMatchObject({
      action: 'agent.sign.personal_sign',
      actorType: 'agent',
      actorId: AGENT,
    });
    const text_ = JSON.stringify(r.audits);
    expect(text_).toContain(out.messageHash!);
    for (const never of [PK_HEX, out.signature.slice(2), hexlify(toUtf8Bytes(text)).slice(2)]) {
      expect(text_.toLowerCase()).not.toContain(never.toLowerCase());
    }
  });

  it('answers no signature when its audit record cannot be committed (503)', async () => {
    const r = rig({ failRecord: true });
    await expect(r.sign({ message: '0x01' })).rejects.toMatchObject({ kind: 'unavailable' });
    await expect(
      r.sign({
        intentType: 'typed_data',
        typedDataJson: JSON.stringify({
          types: { A: [{ name: 'x', type: 'uint8' }] },
          primaryType: 'A',
          domain: {},
          message: { x: 1 },
        }),
      }),
    ).rejects.toMatchObject({ kind: 'unavailable' });
    await expect(
      r.sign({
        intentType: 'transaction',
        to: TO,
        nonce: '1',
        gasLimit: '21000',
        maxFeePerGas: '2',
        maxPriorityFeePerGas: '1',
      }),
    ).rejects.toMatchObject({ kind: 'unavailable' });
  });

  it('refuses before opening the key: message signing off, raw signing off, a malformed field', async () => {
    const off = rig({ settings: { messageSigningEnabled: false } });
    await expect(off.sign({ message: '0x01' })).rejects.toMatchObject({
      kind: 'permission_denied',
      type: 'message_signing_disabled',
    });
    await expect(
      off.sign({ intentType: 'eip712_digest', hash: `0x${'11'.repeat(32)}` }),
    ).rejects.toMatchObject({
      type: 'raw_signing_disabled',
    });
    await expect(off.sign({ intentType: 'nope' })).rejects.toMatchObject({ field: 'intent_type' });
    await expect(off.sign({ intentType: 'transaction', to: TO, txType: 1 })).rejects.toMatchObject({
      field: 'tx_type',
    });
    // Another family's transfer fields on EVM: refused, never a signature of a different transaction
    // (5 ETH signed for a request that meant 5 USDC).
    const on = rig();
    for (const [extra, field] of [
      [{ tokenMint: '0x' + '11'.repeat(20), tokenDecimals: 6 }, 'token_mint'],
      [{ memo: 'invoice 7' }, 'memo'],
      [{ destinationTag: '7' }, 'destination_tag'],
      [{ feeRateSatPerVbyte: '3' }, 'fee_rate_sat_per_vbyte'],
      [{ feeLimitSun: '1000' }, 'fee_limit_sun'],
      [{ ttl: '100' }, 'ttl'],
    ] as const) {
      await expect(
        on.sign({ intentType: 'transaction', to: TO, value: '5.0', ...extra }),
      ).rejects.toMatchObject({
        kind: 'invalid_argument',
        field,
      });
      await expect(on.sign({ message: '0x01', ...extra })).rejects.toMatchObject({ field });
    }
    expect(on.loads()).toBe(0);
    expect(on.audits).toHaveLength(0);
    expect(off.loads()).toBe(0);
    expect(off.audits).toHaveLength(0);
  });

  it('transaction: a fully given one is signed without the node; missing figures come from it', async () => {
    const given = rig({ rpc: {} });
    const out = await given.sign({
      intentType: 'transaction',
      to: TO,
      value: '0.5',
      nonce: '3',
      gasLimit: '21000',
      maxFeePerGas: '2000000000',
      maxPriorityFeePerGas: '1000000000',
    });
    expect(given.rpcCalls).toEqual([]);
    const tx = Transaction.from(out.signedTx!);
    expect({ from: tx.from, nonce: tx.nonce, value: tx.value, type: tx.type }).toEqual({
      from: ADDRESS,
      nonce: 3,
      value: 5n * 10n ** 17n,
      type: 2,
    });
    expect(out).toMatchObject({ status: 'sign_only', txType: 2, nonce: 3, txHash: tx.hash });
    expect(given.rows[0]).toMatchObject({
      id: out.transactionId,
      nonce: 3,
      txHash: tx.hash,
      signedTx: out.signedTx,
    });
    expect(given.audits[0]).toMatchObject({ action: 'agent.sign.transaction' });
    expect(JSON.stringify(given.audits)).not.toContain(out.signedTx!.slice(2));

    const filled = rig();
    const f = await filled.sign({ intentType: 'transaction', to: TO });
    expect(filled.rpcCalls.sort()).toEqual(['estimateGas', 'feeData', 'pendingNonce']);
    expect(Transaction.from(f.signedTx!)).toMatchObject({
      nonce: 9,
      gasLimit: 21000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
  });

  it("transaction: no nonce given takes the chain's pending nonce or the Transactions API's next one, the higher", async () => {
    const ahead = rig({ storedNext: 12 });
    expect((await ahead.sign({ intentType: 'transaction', to: TO })).nonce).toBe(12);
    const behind = rig({ storedNext: 5 });
    expect((await behind.sign({ intentType: 'transaction', to: TO })).nonce).toBe(9);
    const none = rig();
    expect((await none.sign({ intentType: 'transaction', to: TO })).nonce).toBe(9);
    const given = rig({ storedNext: 12 });
    expect((await given.sign({ intentType: 'transaction', to: TO, nonce: '4' })).nonce).toBe(4);
  });

  it("transaction: the node's refusal is a 422 chain_rejected, an unreachable node a 503; nothing recorded", async () => {
    const refused = rig({
      rpc: {
        estimateGas: () =>
          Promise.reject(new EvmRpcError('eth_estimateGas failed: insufficient funds', true)),
      },
    });
    const e1 = await refused.sign({ intentType: 'transaction', to: TO, value: '1' }).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(CustosError);
    expect(e1).toMatchObject({ kind: 'unprocessable', type: 'chain_rejected' });
    const down = rig({ rpc: { pendingNonce: () => Promise.reject(new EvmRpcError('fetch failed', false)) } });
    await expect(
      down.sign({ intentType: 'transaction', to: TO, gasLimit: '21000', gasPrice: '1', txType: 0 }),
    ).rejects.toMatchObject({
      kind: 'unavailable',
    });
    expect([...refused.audits, ...down.audits, ...refused.rows, ...down.rows]).toEqual([]);
  });

  it("transaction: chain calls that outlast the caller's deadline end in 503 with nothing signed or stored", async () => {
    const slow = rig({
      rpc: {
        pendingNonce: () => new Promise((resolve) => setTimeout(() => resolve(9), 150)),
      },
    });
    const budget = { deadline: Date.now() + 100, cancelled: () => false };
    await expect(slow.sign({ intentType: 'transaction', to: TO }, budget)).rejects.toMatchObject({
      kind: 'unavailable',
    });
    expect(slow.loads()).toBe(0);
    expect([...slow.rows, ...slow.audits]).toEqual([]);
  });

  it('drops a signature (503, nothing recorded) when too little time is left to record it', async () => {
    const r = rig();
    const short = { deadline: Date.now() + RECORD_MARGIN_MS / 2, cancelled: () => false };
    const tx = { intentType: 'transaction', to: TO, nonce: '1', gasLimit: '21000', gasPrice: '1', txType: 0 };
    await expect(r.sign(tx, short)).rejects.toMatchObject({ kind: 'unavailable' });
    await expect(r.sign({ message: '0x01' }, short)).rejects.toMatchObject({ kind: 'unavailable' });
    expect(r.loads()).toBe(2);
    expect([...r.rows, ...r.audits]).toEqual([]);
  });

  it('signs nothing for a cancelled call; signs within a deadline that leaves room', async () => {
    const r = rig();
    const gone = { deadline: Date.now() + 60_000, cancelled: () => true };
    await expect(r.sign({ message: '0x01' }, gone)).rejects.toMatchObject({ kind: 'unavailable' });
    expect(r.loads()).toBe(0);
    const roomy = { deadline: Date.now() + 60_000, cancelled: () => false };
    await expect(r.sign({ intentType: 'transaction', to: TO }, roomy)).resolves.toMatchObject({
      status: 'sign_only',
    });
    expect(r.rows).toHaveLength(1);
  });
});
