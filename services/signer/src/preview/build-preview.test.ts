import { AbiCoder, Interface, MaxUint256, Wallet, keccak256, parseEther } from 'ethers';
import { buildPreview } from './build-preview';
import { balanceChanges, decodeRevert, numbersIn } from './preview-fns';
import type { PreviewInput, PreviewSummary } from './preview-types';

// The preview's decoding and flags without a chain (no rpc: simulation null). Simulation and balance
// changes against a real anvil are in test/preview.spec.ts.
const erc20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
]);
const nft = new Interface(['function setApprovalForAll(address operator, bool approved)']);
const weth = new Interface(['function deposit()']);

const FROM = Wallet.createRandom().address;
const TOKEN = Wallet.createRandom().address;
const ALICE = Wallet.createRandom().address;
const MALLORY = Wallet.createRandom().address;
const OWNER = Wallet.createRandom().address;

const ANVIL = { name: 'anvil', chainId: 31337n, family: 'evm', nativeSymbol: 'ETH', decimals: 18 };

function input(o: Partial<PreviewInput>): PreviewInput {
  return { chain: ANVIL, from: FROM, to: TOKEN, valueWei: 0n, data: '0x', tier: 2, ...o };
}

function summary(body: string, fields: { label: string; value: string }[] = []): PreviewSummary {
  return { title: 'Pay the supplier', body, fields };
}

const codes = (p: Record<string, unknown>) => (p.flags as { code: string }[]).map((f) => f.code);

describe('buildPreview (decoding and flags)', () => {
  it('an ERC-20 transfer decodes to its recipient and amount', async () => {
    const p = await buildPreview(input({ data: erc20.encodeFunctionData('transfer', [ALICE, 2_500_000n]) }));
    expect(p).toMatchObject({
      chain: 'anvil',
      chain_id: '31337',
      from: FROM,
      to: TOKEN,
      value_wei: '0',
      value: '0',
      symbol: 'ETH',
      call: {
        selector: '0xa9059cbb',
        name: 'transfer',
        signature: 'transfer(address,uint256)',
        args: { to: ALICE, amount: '2500000' },
        contract: TOKEN,
      },
      token_transfer: { token: TOKEN, recipient: ALICE, amount_raw: '2500000', kind: 'erc20_transfer' },
      simulation: null,
      rule: null,
      risk_tier: 2,
      summary: null,
      flags: [],
    });
  });

  const transferTo = (to: string, amount: bigint) => erc20.encodeFunctionData('transfer', [to, amount]);

  const table: { name: string; input: PreviewInput; flags: string[] }[] = [
    {
      name: 'a summary naming another recipient of an ERC-20 transfer',
      input: input({
        data: transferTo(ALICE, 10n ** 18n),
        summary: summary(`Send 1 token to ${MALLORY}`, [{ label: 'Recipient', value: MALLORY }]),
      }),
      flags: ['summary_recipient_mismatch'],
    },
    {
      name: 'a summary naming the real recipient, lowercased, the token and the sender',
      input: input({
        data: transferTo(ALICE, 10n ** 18n),
        summary: summary(`Send 1 token of ${TOKEN} from ${FROM} to ${ALICE.toLowerCase()}`),
      }),
      flags: [],
    },
    {
      name: 'a transaction hash in the summary is not an address',
      input: input({ data: transferTo(ALICE, 1n), summary: summary(`after 0x${'ab'.repeat(32)}`) }),
      flags: [],
    },
    {
      name: 'an unlimited approval (MaxUint256)',
      input: input({ data: erc20.encodeFunctionData('approve', [ALICE, MaxUint256]) }),
      flags: ['unlimited_approval'],
    },
    {
      name: 'an approval of 2^255 is unlimited too',
      input: input({ data: erc20.encodeFunctionData('approve', [ALICE, 1n << 255n]) }),
      flags: ['unlimited_approval'],
    },
    {
      name: 'a bounded approval is not',
      input: input({ data: erc20.encodeFunctionData('approve', [ALICE, (1n << 255n) - 1n]) }),
      flags: [],
    },
    {
      name: 'setApprovalForAll(true) is unlimited; (false) is not',
      input: input({ data: nft.encodeFunctionData('setApprovalForAll', [ALICE, true]) }),
      flags: ['unlimited_approval'],
    },
    {
      name: 'setApprovalForAll(false)',
      input: input({ data: nft.encodeFunctionData('setApprovalForAll', [ALICE, false]) }),
      flags: [],
    },
    {
      name: 'a summary amount matching the token amount at 18 decimals',
      input: input({
        data: transferTo(ALICE, 1_500_000_000_000_000_000n),
        summary: summary('', [{ label: 'Amount', value: '1.5 DAI' }]),
      }),
      flags: [],
    },
    {
      name: 'a summary amount matching the token amount at 6 decimals, with separators',
      input: input({
        data: transferTo(ALICE, 1_250_000_000n),
        summary: summary('', [{ label: 'amount', value: '1,250 USDC' }]),
      }),
      flags: [],
    },
    {
      name: 'a summary amount matching the raw amount',
      input: input({
        data: transferTo(ALICE, 42n),
        summary: summary('', [{ label: 'Token amount', value: '42' }]),
      }),
      flags: [],
    },
    {
      name: 'a summary amount that is none of them',
      input: input({
        data: transferTo(ALICE, 1_250_000_000n),
        summary: summary('', [{ label: 'Amount', value: '12.5 USDC' }]),
      }),
      flags: ['summary_amount_mismatch'],
    },
    {
      name: 'a field not labelled as an amount is not checked',
      input: input({
        data: transferTo(ALICE, 1n),
        summary: summary('', [{ label: 'Invoice', value: '2024-117' }]),
      }),
      flags: [],
    },
    {
      name: 'a native transfer whose summary states another value',
      input: input({
        to: ALICE,
        valueWei: parseEther('0.5'),
        summary: summary('', [{ label: 'Value', value: '5 ETH' }]),
      }),
      flags: ['summary_amount_mismatch'],
    },
    {
      name: 'a native transfer whose summary states its value',
      input: input({
        to: ALICE,
        valueWei: parseEther('0.5'),
        summary: summary(`to ${ALICE}`, [{ label: 'Value', value: '0.50 ETH' }]),
      }),
      flags: [],
    },
    {
      name: 'a native transfer whose summary names another address',
      input: input({ to: ALICE, valueWei: 1n, summary: summary(`to ${MALLORY}`) }),
      flags: ['summary_recipient_mismatch'],
    },
    {
      name: 'native value sent with a token transfer',
      input: input({ data: transferTo(ALICE, 1n), valueWei: 1n }),
      flags: ['value_and_call'],
    },
    {
      name: 'native value sent with a WETH deposit is how deposit works',
      input: input({ data: weth.encodeFunctionData('deposit', []), valueWei: 1n }),
      flags: [],
    },
    {
      name: 'an unknown call sending nothing: amounts are not checked, addresses are',
      input: input({
        data: '0x12345678',
        summary: summary(`to ${MALLORY}`, [{ label: 'Amount', value: '99' }]),
      }),
      flags: ['summary_recipient_mismatch'],
    },
    {
      name: 'transferFrom: the owner may be named',
      input: input({
        data: erc20.encodeFunctionData('transferFrom', [OWNER, ALICE, 3n]),
        summary: summary(`move 3 from ${OWNER} to ${ALICE}`),
      }),
      flags: [],
    },
  ];

  it.each(table)('$name → $flags', async ({ input: i, flags }) => {
    expect(codes(await buildPreview(i))).toEqual(flags);
  });

  it('an unknown selector is shown with name null and no token transfer', async () => {
    const p = await buildPreview(input({ data: '0xcafebabe' }));
    expect(p.call).toEqual({
      selector: '0xcafebabe',
      name: null,
      signature: null,
      args: {},
      contract: TOKEN,
    });
    expect(p.token_transfer).toBeNull();
  });

  it('a plain transfer has no call; value is in major units; summary and rule are shown as given', async () => {
    const s = summary('rent', [{ label: 'Amount', value: '1.25' }]);
    const rule = { risk_tier: 2, conditions: [{ value_above: { threshold_wei: '1' } }] };
    const p = await buildPreview(input({ to: ALICE, valueWei: parseEther('1.25'), summary: s, rule }));
    expect(p).toMatchObject({
      call: null,
      token_transfer: null,
      value: '1.25',
      value_wei: '1250000000000000000',
    });
    expect(p.summary).toEqual(s);
    expect(p.rule).toEqual(rule);
    expect(p.flags).toEqual([]);
  });

  it('flag details name what disagrees', async () => {
    const p = await buildPreview(
      input({ data: transferTo(ALICE, 1n), summary: summary(`pay ${MALLORY.toLowerCase()}`) }),
    );
    expect(p.flags).toEqual([
      { code: 'summary_recipient_mismatch', detail: expect.stringContaining(MALLORY) },
    ]);
  });

  it('a 200 KiB return value and a 128 KiB bytes argument are named by size and keccak-256: the preview stays small', async () => {
    const big = `0x${'ab'.repeat(200 * 1024)}`;
    const nft721 = new Interface([
      'function safeTransferFrom(address from, address to, uint256 tokenId, bytes data)',
    ]);
    const arg = `0x${'cd'.repeat(128 * 1024)}`;
    const data = nft721.encodeFunctionData('safeTransferFrom', [FROM, ALICE, 7n, arg]);
    const p = await buildPreview(input({ data }), {
      call: async () => ({ ok: true, data: big }),
    });
    const json = JSON.stringify(p);
    expect(json.length).toBeLessThan(16 * 1024);
    expect(p.simulation).toMatchObject({
      ok: true,
      return_data_truncated: true,
      return_data_bytes: 200 * 1024,
      return_data_keccak256: keccak256(big),
    });
    expect((p.simulation as Record<string, unknown>).return_data).toBeUndefined();
    const args = (p.call as { args: Record<string, string> }).args;
    expect(args.data).toContain(`${128 * 1024} bytes, keccak256 ${keccak256(arg)}`);
    expect(args.tokenId).toBe('7');
    // a long revert reason is bounded too
    const reason = 'x'.repeat(100_000);
    const reverted = await buildPreview(input({ data }), {
      call: async () => ({
        ok: false,
        data: '0x08c379a0' + AbiCoder.defaultAbiCoder().encode(['string'], [reason]).slice(2),
      }),
    });
    expect(JSON.stringify(reverted).length).toBeLessThan(16 * 1024);
    // small return data is shown as is
    const small = await buildPreview(input({ data }), { call: async () => ({ ok: true, data: '0x01' }) });
    expect(small.simulation).toMatchObject({ return_data: '0x01' });
  });

  describe('non-EVM chains', () => {
    const BTC = { name: 'bitcoin', chainId: '0', family: 'utxo', nativeSymbol: 'BTC', decimals: 8 };
    it('value in major units from the chain decimals, no call, no simulation', async () => {
      const asked: unknown[] = [];
      const p = await buildPreview(
        { chain: BTC, from: 'bc1qsender', to: 'bc1qdest', valueWei: 150_000_000n, data: '0x', tier: 1 },
        { call: (c) => (asked.push(c), Promise.resolve({ ok: true, data: '0x' })) },
      );
      expect(asked).toEqual([]);
      expect(p).toMatchObject({
        chain: 'bitcoin',
        from: 'bc1qsender',
        to: 'bc1qdest',
        value: '1.5',
        call: null,
        simulation: null,
        flags: [],
      });
    });

    it('a token transfer: no native value, the token and its amount in token_transfer', async () => {
      const SOL = { name: 'solana', chainId: '0', family: 'solana', nativeSymbol: 'SOL', decimals: 9 };
      const p = await buildPreview({
        chain: SOL,
        from: 'Sender111',
        to: 'Dest111',
        valueWei: 0n,
        data: '0x',
        tier: 2,
        token: { mint: 'MintAbc', amountRaw: 1_500_000n, decimals: 6 },
      });
      expect(p).toMatchObject({
        value_wei: '0',
        value: '0',
        token_transfer: {
          token: 'MintAbc',
          recipient: 'Dest111',
          amount_raw: '1500000',
          decimals: 6,
          amount: '1.5',
        },
      });
      const unknown = await buildPreview({
        chain: SOL,
        from: 'Sender111',
        to: 'Dest111',
        valueWei: 0n,
        data: '0x',
        tier: 2,
        token: { mint: 'MintAbc' },
      });
      expect(unknown.token_transfer).toEqual({ token: 'MintAbc', recipient: 'Dest111', amount_raw: null });
    });

    it('the recipient check compares with the literal to only', async () => {
      const base = {
        chain: { ...BTC, family: 'tron', decimals: 6 },
        from: FROM,
        valueWei: 1n,
        data: '0x',
        tier: 1,
      };
      const ok = await buildPreview({ ...base, to: ALICE, summary: summary(`to ${ALICE}`) });
      expect(codes(ok)).toEqual([]);
      const bad = await buildPreview({ ...base, to: ALICE, summary: summary(`to ${MALLORY}`) });
      expect(codes(bad)).toEqual(['summary_recipient_mismatch']);
    });
  });
});

describe('preview functions', () => {
  it('decodeRevert reads Error(string) and Panic, nothing else', () => {
    const coder = AbiCoder.defaultAbiCoder();
    expect(decodeRevert('0x08c379a0' + coder.encode(['string'], ['nope']).slice(2))).toBe('nope');
    expect(decodeRevert('0x4e487b71' + coder.encode(['uint256'], [0x11]).slice(2))).toBe(
      'panic 0x11 (arithmetic overflow or underflow)',
    );
    expect(decodeRevert('0x')).toBeUndefined();
    expect(decodeRevert('0xdeadbeef')).toBeUndefined();
  });

  it('balanceChanges reads a prestate diff: changed, new, deleted and untouched accounts', () => {
    const diff = {
      pre: {
        [FROM.toLowerCase()]: { balance: '0x64' },
        [OWNER.toLowerCase()]: { balance: '0x5' },
        [MALLORY.toLowerCase()]: { balance: '0x9' },
      },
      post: {
        [FROM.toLowerCase()]: { balance: '0x5a', nonce: 1 },
        [ALICE.toLowerCase()]: { balance: '0xa' },
        [MALLORY.toLowerCase()]: { nonce: 3 },
      },
    };
    const changes = balanceChanges(diff, FROM);
    expect(changes[0]).toEqual({ address: FROM, before_wei: '100', after_wei: '90', delta_wei: '-10' });
    expect(changes).toContainEqual({ address: ALICE, before_wei: '0', after_wei: '10', delta_wei: '10' });
    expect(changes).toContainEqual({ address: OWNER, before_wei: '5', after_wei: '0', delta_wei: '-5' });
    expect(changes).toHaveLength(3); // MALLORY's balance did not change
  });

  it('numbersIn skips hex and words', () => {
    expect(numbersIn(`1,000.50 USDC to ${ALICE} (ERC20, ref 7)`)).toEqual(['1000.5', '7']);
  });
});
