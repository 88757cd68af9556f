import { Interface, Wallet } from 'ethers';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import { canonicalJson } from '@custos/service-kit';
import {
  PAYLOAD_DATA_MAX,
  approvalPayload,
  approvalRequestHash,
  erc20AmountOf,
  evmTxFacts,
  selectorOf,
  summaryOr,
  transferFacts,
} from './approval-fns.js';
import { PREVIEW_JSON_MAX, boundPreview } from './approval-gate.js';

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
  'function mint(address to, uint256 amount)',
]);
const A = Wallet.createRandom().address;
const B = Wallet.createRandom().address;

describe('approval facts', () => {
  it('selectorOf: 0x + 8 lowercase hex when data has 4 bytes or more', () => {
    expect(selectorOf('0xA9059CBB00')).toBe('0xa9059cbb');
    expect(selectorOf('0xa9059c')).toBeUndefined();
    expect(selectorOf('')).toBeUndefined();
    expect(selectorOf('0x')).toBeUndefined();
    expect(selectorOf('0xzz059cbb')).toBeUndefined();
  });

  it('erc20AmountOf decodes transfer, approve and transferFrom; not other calls or malformed data', () => {
    expect(erc20AmountOf(ERC20.encodeFunctionData('transfer', [A, 5n]))).toBe(5n);
    expect(erc20AmountOf(ERC20.encodeFunctionData('approve', [A, 2n ** 256n - 1n]))).toBe(2n ** 256n - 1n);
    expect(erc20AmountOf(ERC20.encodeFunctionData('transferFrom', [A, B, 7n]))).toBe(7n);
    expect(erc20AmountOf(ERC20.encodeFunctionData('mint', [A, 5n]))).toBeUndefined();
    const t = ERC20.encodeFunctionData('transfer', [A, 5n]);
    // truncated: a known selector whose amount cannot be read is unknown (fails closed)
    expect(erc20AmountOf(t.slice(0, -2))).toBe('unknown');
    expect(erc20AmountOf(t.slice(0, 10))).toBe('unknown');
    // trailing bytes are ignored, as Solidity ignores them
    expect(erc20AmountOf(`${t}00`)).toBe(5n);
    expect(erc20AmountOf(`${t}${'ff'.repeat(40)}`)).toBe(5n);
    // a dirty address word still reads the amount word as the token would
    expect(erc20AmountOf(`0xa9059cbb${'ff'.repeat(32)}${'00'.repeat(31)}05`)).toBe(5n);
    expect(erc20AmountOf(undefined)).toBeUndefined();
  });

  it('evmTxFacts: a known ERC-20 call whose amount cannot be read says so; trailing bytes keep the amount', () => {
    const data = ERC20.encodeFunctionData('transfer', [A, 10n ** 24n]);
    const f = (d: string) => evmTxFacts({ name: 'anvil', chainId: 31337n }, { to: B, value: 0n, data: d });
    expect(f(`${data}00`)).toMatchObject({ erc20Amount: 10n ** 24n });
    expect(f(`${data}00`).erc20AmountUnknown).toBeUndefined();
    expect(f(data.slice(0, 20))).toMatchObject({ erc20AmountUnknown: true, selector: '0xa9059cbb' });
    expect(f(data.slice(0, 20)).erc20Amount).toBeUndefined();
  });

  it('evmTxFacts: chain name and id, to, value, selector and amount', () => {
    const data = ERC20.encodeFunctionData('transfer', [A, 9n]);
    expect(evmTxFacts({ name: 'anvil', chainId: 31337n }, { to: B, value: 3n, data })).toEqual({
      action: 'agent_transaction',
      intentType: 'transaction',
      chain: 'anvil',
      chainId: '31337',
      to: B,
      valueWei: 3n,
      selector: '0xa9059cbb',
      erc20Amount: 9n,
    });
    expect(evmTxFacts({ name: 'anvil', chainId: 1n }, { to: null, value: 0n, data: '0x' })).toEqual({
      action: 'agent_transaction',
      intentType: 'transaction',
      chain: 'anvil',
      chainId: '1',
      valueWei: 0n,
    });
  });

  it('transferFacts: native value in base units; a token transfer moves no native value', () => {
    const chain = { name: 'bitcoin', nativeDecimals: 8 };
    expect(transferFacts(chain, { to: 'bc1q', value: '0.5' })).toMatchObject({
      valueWei: 50_000_000n,
      to: 'bc1q',
    });
    expect(transferFacts(chain, { to: 'bc1q', value: '1000' })).toMatchObject({ valueWei: 1000n });
    const token = transferFacts(
      { name: 'solana', nativeDecimals: 9 },
      {
        to: 'x',
        value: '1.5',
        tokenMint: 'M',
        tokenDecimals: 6,
      },
    );
    expect(token).toMatchObject({ valueWei: 0n, erc20Amount: 1_500_000n });
    expect(transferFacts(chain, { to: 'x', value: 'junk' }).valueWei).toBeUndefined();
  });
});

describe('approvalRequestHash', () => {
  const req = (body: Record<string, unknown>, extra: Partial<SubmitTransactionRequest> = {}) =>
    ({ canonicalBody: canonicalJson(body), ...extra }) as SubmitTransactionRequest;

  it('is the hash of the body without resume_tx_id', () => {
    const body = { chain: 'anvil', to: A, value: '1', summary: { title: 't' } };
    const h = approvalRequestHash(req(body));
    expect(approvalRequestHash(req({ ...body, resume_tx_id: 'x' }))).toBe(h);
    expect(approvalRequestHash(req({ ...body, value: '2' }))).not.toBe(h);
    expect(approvalRequestHash(req({ ...body, summary: { title: 'u' } }))).not.toBe(h);
    expect(approvalRequestHash(req({ ...body, to: B }))).not.toBe(h);
  });

  it('without a body text: from the fields, resume_tx_id left out', () => {
    const f = {
      chain: 'anvil',
      to: A,
      value: '1',
      unsupportedFields: [],
    } as unknown as SubmitTransactionRequest;
    const h = approvalRequestHash(f);
    expect(approvalRequestHash({ ...f, resumeTxId: 'abc' })).toBe(h);
    expect(approvalRequestHash({ ...f, value: '2' })).not.toBe(h);
  });
});

describe('summaryOr', () => {
  it("keeps the agent's summary, else titles it", () => {
    expect(summaryOr({ title: 'T', body: 'B', fields: [] }, 'x')).toEqual({
      title: 'T',
      body: 'B',
      fields: [],
    });
    expect(summaryOr(undefined, 'x')).toEqual({ title: 'x', body: '', fields: [] });
  });
});

describe('approvalPayload', () => {
  it('carries the call data as sent, or its size and hash when it is too long for the approval', () => {
    expect(approvalPayload('anvil', A, '1', '0xabcd')).toEqual({
      chain: 'anvil',
      to: A,
      value: '1',
      data: '0xabcd',
    });
    const long = `0x${'ab'.repeat(PAYLOAD_DATA_MAX)}`;
    const p = approvalPayload('anvil', A, '1', long);
    expect(p).toMatchObject({ data_truncated: true, data_bytes: PAYLOAD_DATA_MAX });
    expect(p['data_keccak256']).toMatch(/^0x[0-9a-f]{64}$/);
    expect(p).not.toHaveProperty('data');
  });
});

describe('boundPreview', () => {
  it('keeps a small preview; past the bound leaves out summary and rule (approvals stores them), then the args', () => {
    const small = { chain: 'anvil', summary: { title: 't' }, rule: { risk_tier: 1 }, call: null };
    expect(boundPreview(small)).toBe(small);
    const long = 'x'.repeat(PREVIEW_JSON_MAX);
    const p = boundPreview({ chain: 'anvil', summary: { title: long }, rule: { risk_tier: 1 }, call: null });
    expect(p).toEqual({ chain: 'anvil', summary: null, rule: null, call: null, trimmed: true });
    const args = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`a${i}`, 'y'.repeat(2048)]));
    const q = boundPreview({ chain: 'anvil', summary: null, rule: null, call: { name: 'f', args } });
    expect(q.call).toEqual({ name: 'f', args: {}, args_left_out: true });
    expect(JSON.stringify(q).length).toBeLessThan(PREVIEW_JSON_MAX);
  });

  it('3,000 balance changes: at most 100 kept (the sender, then the largest |delta|), the rest counted, args kept', () => {
    const from = `0x${'f'.repeat(40)}`;
    const change = (i: number, delta: bigint) => ({
      address: `0x${i.toString(16).padStart(40, '0')}`,
      before_wei: '1000000000000000000000',
      after_wei: (1000000000000000000000n + delta).toString(),
      delta_wei: delta.toString(),
    });
    const changes = [
      { address: from, before_wei: '5', after_wei: '4', delta_wei: '-1' },
      ...Array.from({ length: 2999 }, (_, i) => change(i + 1, BigInt(i + 1) * (i % 2 ? -1n : 1n))),
    ];
    const args = { to: `0x${'a'.repeat(40)}`, amount: '12345' };
    const p = boundPreview({
      chain: 'anvil',
      from,
      summary: { title: 't' },
      rule: { risk_tier: 1 },
      call: { name: 'transfer', args },
      simulation: { ok: true, balance_changes: changes, trace: 'debug_traceCall' },
    });
    expect(Buffer.byteLength(JSON.stringify(p), 'utf8')).toBeLessThanOrEqual(PREVIEW_JSON_MAX);
    expect(p.call).toEqual({ name: 'transfer', args });
    const sim = p.simulation as {
      balance_changes: { address: string; delta_wei: string }[];
      balance_changes_left_out: number;
    };
    expect(sim.balance_changes).toHaveLength(100);
    expect(sim.balance_changes_left_out).toBe(2900);
    expect(sim.balance_changes[0]!.address).toBe(from);
    // the 99 others are the largest |delta|: 2901..2999
    const deltas = sim.balance_changes
      .slice(1)
      .map((c) => (BigInt(c.delta_wei) < 0n ? -BigInt(c.delta_wei) : BigInt(c.delta_wei)));
    expect(deltas.every((d) => d >= 2901n)).toBe(true);
  });

  it('whatever the size, the JSON ends within PREVIEW_JSON_MAX (simulation first, then args, then the largest fields)', () => {
    const big = 'z'.repeat(PREVIEW_JSON_MAX);
    const p = boundPreview({
      chain: 'anvil',
      from: '0x1',
      call: { name: 'f', args: { a: '1' } },
      simulation: { ok: true, return_data: big, balance_changes: [] },
    });
    expect(p.simulation).toEqual({ ok: true, trimmed: true });
    expect(p.call).toEqual({ name: 'f', args: { a: '1' } });
    const q = boundPreview({
      chain: 'anvil',
      from: '0x1',
      call: null,
      token_transfer: { memo: big },
      flags: [],
    });
    expect(Buffer.byteLength(JSON.stringify(q), 'utf8')).toBeLessThanOrEqual(PREVIEW_JSON_MAX);
    expect(q).toMatchObject({ token_transfer: null, left_out: ['token_transfer'], chain: 'anvil' });
  });
});
