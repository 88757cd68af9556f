import { CustosError, InvalidArgumentError } from '@custos/service-kit';
import { evmCapsOf, fillEvmTransaction } from './evm-fill.js';
import { type EvmRpc, EvmRevert } from './evm-rpc.js';

const GWEI = 1_000_000_000n;

function fakeRpc(
  o: { base?: bigint; tip?: bigint; gas?: bigint; revert?: string } = {},
): EvmRpc & { calls: string[] } {
  const calls: string[] = [];
  const base = o.base ?? 1n * GWEI;
  const tip = o.tip ?? 1n * GWEI;
  return {
    calls,
    feeData: async () => {
      calls.push('fees');
      return { maxFeePerGas: 2n * base + tip, maxPriorityFeePerGas: tip, gasPrice: base + tip };
    },
    estimateGas: async () => {
      calls.push('estimate');
      if (o.revert) throw new EvmRevert(o.revert);
      return o.gas ?? 21000n;
    },
    call: async () => ({ ok: true, data: '0x' }),
    pendingNonce: async () => 0,
    sendRawTransaction: async () => '0x',
    receipt: async () => null,
  };
}

const req = {
  chainId: 31337n,
  from: '0x' + '11'.repeat(20),
  to: '0x' + '22'.repeat(20),
  value: 1n,
  data: '0x',
} as const;

async function fieldOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

describe('fillEvmTransaction', () => {
  it('estimates gas and takes EIP-1559 fees from the chain (2 × base + tip)', async () => {
    const f = await fillEvmTransaction(fakeRpc({ base: 3n * GWEI, tip: 2n * GWEI }), { ...req, type: 2 }, {});
    expect(f).toMatchObject({
      type: 2,
      gasLimit: 21000n,
      maxFeePerGas: 8n * GWEI,
      maxPriorityFeePerGas: 2n * GWEI,
    });
    expect(f.clamped).toEqual([]);
  });

  it('uses what the caller gave without asking the chain', async () => {
    const rpc = fakeRpc();
    const f = await fillEvmTransaction(
      rpc,
      { ...req, type: 2, gasLimit: 30000n, maxFeePerGas: 5n * GWEI, maxPriorityFeePerGas: GWEI },
      {},
    );
    expect(f).toMatchObject({ gasLimit: 30000n, maxFeePerGas: 5n * GWEI, maxPriorityFeePerGas: GWEI });
    expect(rpc.calls).toEqual([]);
  });

  it('lowers fetched fees to the cap and refuses given ones above it, naming the field', async () => {
    const caps = evmCapsOf({ maxFeePerGasGwei: 2.5, maxGasLimit: '50000' });
    expect(caps).toEqual({ maxFeePerGas: 2_500_000_000n, maxGasLimit: 50000n });
    const f = await fillEvmTransaction(
      fakeRpc({ base: 5n * GWEI, tip: 3n * GWEI }),
      { ...req, type: 2 },
      caps,
    );
    expect(f).toMatchObject({ maxFeePerGas: 2_500_000_000n, maxPriorityFeePerGas: 2_500_000_000n });
    expect(f.clamped).toEqual(['max_fee_per_gas', 'max_priority_fee_per_gas']);
    const legacy = await fillEvmTransaction(fakeRpc({ base: 5n * GWEI }), { ...req, type: 0 }, caps);
    expect(legacy).toMatchObject({ type: 0, gasPrice: 2_500_000_000n, clamped: ['gas_price'] });
    expect(
      await fieldOf(fillEvmTransaction(fakeRpc(), { ...req, type: 2, maxFeePerGas: 3n * GWEI }, caps)),
    ).toBe('max_fee_per_gas');
    expect(await fieldOf(fillEvmTransaction(fakeRpc(), { ...req, type: 0, gasPrice: 3n * GWEI }, caps))).toBe(
      'gas_price',
    );
    expect(await fieldOf(fillEvmTransaction(fakeRpc(), { ...req, type: 2, gasLimit: 50001n }, caps))).toBe(
      'gas_limit',
    );
    expect(await fieldOf(fillEvmTransaction(fakeRpc({ gas: 60000n }), { ...req, type: 2 }, caps))).toBe(
      'gas_limit',
    );
  });

  it('refuses fields of the other type and a tip above the max fee', async () => {
    expect(await fieldOf(fillEvmTransaction(fakeRpc(), { ...req, type: 2, gasPrice: 1n }, {}))).toBe(
      'gas_price',
    );
    expect(await fieldOf(fillEvmTransaction(fakeRpc(), { ...req, type: 0, maxFeePerGas: 1n }, {}))).toBe(
      'max_fee_per_gas',
    );
    expect(
      await fieldOf(
        fillEvmTransaction(fakeRpc(), { ...req, type: 2, maxFeePerGas: 1n, maxPriorityFeePerGas: 2n }, {}),
      ),
    ).toBe('max_priority_fee_per_gas');
  });

  it('answers a reverting estimate with 422 transaction_reverts and its reason', async () => {
    await expect(
      fillEvmTransaction(fakeRpc({ revert: 'nope' }), { ...req, type: 2 }, {}),
    ).rejects.toMatchObject({
      kind: 'unprocessable',
      type: 'transaction_reverts',
      detail: 'the transaction would revert: nope',
    });
    await expect(
      fillEvmTransaction(fakeRpc({ revert: 'x' }), { ...req, type: 2 }, {}),
    ).rejects.toBeInstanceOf(CustosError);
  });
});
