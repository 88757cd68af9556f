import { InvalidArgumentError, createLogger } from '@custos/service-kit';
import type { ChainRecord } from '../chains/chain-types.js';
import { ChainRpcError } from '../keys/chain-adapter.js';
import { evmAdapter } from '../keys/evm-adapter.js';
import { PREPARE, endpointOf, onChain, spendOf, transfersOf } from './transfer-flow.js';

const logger = createLogger({ service: 'signer-test', level: 'silent' });
const chain = { name: 'solana-devnet', family: 'solana', rpcUrl: 'http://node.invalid' } as ChainRecord;
const failing = (err: unknown) => () => Promise.reject(err);

describe('the transfer flow: how chain failures answer', () => {
  it('a chain with no node configured is 503, naming the chain and never a URL', () => {
    expect(() => endpointOf({ ...chain, rpcUrl: '' }, 1000)).toThrow(
      expect.objectContaining({ kind: 'unavailable', detail: expect.stringContaining('solana-devnet') }),
    );
    expect(endpointOf(chain, 1000)).toEqual({ chain, url: 'http://node.invalid', timeoutMs: 1000 });
  });

  it('a family without transfers is 400 naming chain', () => {
    expect(() => transfersOf(evmAdapter, { ...chain, family: 'evm' })).toThrow(
      expect.objectContaining({ kind: 'invalid_argument', field: 'chain' }),
    );
  });

  it("the node refusing the transfer is 422 chain_rejected; no usable answer, or a 4xx to one of prepare's reads, is 503; the adapter's own 400 passes", async () => {
    await expect(
      onChain(logger, chain, PREPARE, failing(new ChainRpcError('the contract reverts', { rejected: true }))),
    ).rejects.toMatchObject({ kind: 'unprocessable', type: 'chain_rejected' });
    await expect(
      onChain(logger, chain, PREPARE, failing(new ChainRpcError('timed out'))),
    ).rejects.toMatchObject({
      kind: 'unavailable',
    });
    await expect(
      onChain(
        logger,
        chain,
        PREPARE,
        failing(new ChainRpcError('refused (404)', { rejected: true, status: 404 })),
      ),
    ).rejects.toMatchObject({ kind: 'unavailable' });
    await expect(
      onChain(
        logger,
        chain,
        'broadcast',
        failing(new ChainRpcError('refused (400)', { rejected: true, status: 400 })),
      ),
    ).rejects.toMatchObject({ kind: 'unprocessable', type: 'chain_rejected' });
    const own = new InvalidArgumentError('to', 'is not an address of this network');
    await expect(onChain(logger, chain, PREPARE, failing(own))).rejects.toBe(own);
    await expect(onChain(logger, chain, PREPARE, () => Promise.resolve(7))).resolves.toBe(7);
  });

  it('what a transfer spends for the in-flight check: value and expected fee native, a token its value', () => {
    const prepared = { unsigned: {}, to: 'x', value: 100n, fee: 50n, inputs: [], details: {} };
    expect(spendOf({ to: 'x', value: '100' }, prepared)).toBeUndefined(); // no `available`: UTXO chains
    const available = { native: 1_000n, token: 500n };
    expect(spendOf({ to: 'x', value: '100' }, { ...prepared, available })).toEqual({
      native: 150n,
      available,
    });
    expect(
      spendOf({ to: 'x', value: '100', tokenMint: 'M' }, { ...prepared, expectedFee: 7n, available }),
    ).toEqual({
      native: 7n,
      token: 100n,
      tokenMint: 'M',
      available,
    });
  });
});
