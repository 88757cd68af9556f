import path from 'node:path';
import { JsonRpcProvider, toBeHex, zeroPadValue } from 'ethers';
import { EvmRpcPool } from '../src/evm/evm-rpc';
import { ChainlinkPrices, PRICE_UNAVAILABLE, PriceOracle, StaticPrices } from '../src/prices/price-source';

// USD prices for the caps (issue 20): a Chainlink AggregatorV3 read over a real anvil, the static
// table, staleness and refusals. Nothing is mocked: the aggregator is a contract deployed on anvil.

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startMeshAnvil } = require(path.join(__dirname, '../../../tools/mesh/dist/anvil.js')) as {
  startMeshAnvil(): Promise<{ url: string; stop(): Promise<void> }>;
};

/** Anvil's first dev account (unlocked: eth_sendTransaction deploys from it). */
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const hex = (bytes: number[]) => bytes.map((b) => b.toString(16).padStart(2, '0')).join('');

/**
 * The runtime of a minimal AggregatorV3: `decimals()` answers storage slot 0; `latestRoundData()`
 * answers (slot 1 roundId, slot 2 answer, slot 3 startedAt, slot 3 updatedAt, slot 1
 * answeredInRound); anything else reverts. The test moves the price and its time with
 * anvil_setStorageAt, as a feed's transmitter would with a new round.
 *   00 PUSH1 0 CALLDATALOAD PUSH1 0xe0 SHR                 selector
 *   06 DUP1 PUSH4 0x313ce567 EQ PUSH1 0x1d JUMPI          decimals()
 *   10 PUSH4 0xfeaf968c EQ PUSH1 0x29 JUMPI               latestRoundData()
 *   19 PUSH1 0 DUP1 REVERT
 *   1d JUMPDEST PUSH1 0 SLOAD PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN
 *   29 JUMPDEST (PUSH1 slot SLOAD PUSH1 offset MSTORE) for (1,0x00) (2,0x20) (3,0x40) (3,0x60) (1,0x80)
 *   48 PUSH1 0xa0 PUSH1 0 RETURN
 */
const AGGREGATOR_RUNTIME = hex([
  0x60,
  0x00,
  0x35,
  0x60,
  0xe0,
  0x1c,
  0x80,
  0x63,
  0x31,
  0x3c,
  0xe5,
  0x67,
  0x14,
  0x60,
  0x1d,
  0x57,
  0x63,
  0xfe,
  0xaf,
  0x96,
  0x8c,
  0x14,
  0x60,
  0x29,
  0x57,
  0x60,
  0x00,
  0x80,
  0xfd,
  0x5b,
  0x60,
  0x00,
  0x54,
  0x60,
  0x00,
  0x52,
  0x60,
  0x20,
  0x60,
  0x00,
  0xf3,
  0x5b,
  ...[
    [1, 0x00],
    [2, 0x20],
    [3, 0x40],
    [3, 0x60],
    [1, 0x80],
  ].flatMap(([slot, offset]) => [0x60, slot!, 0x54, 0x60, offset!, 0x52]),
  0x60,
  0xa0,
  0x60,
  0x00,
  0xf3,
]);

/** Init code that deploys `runtime` (CODECOPY the bytes after a 12-byte header, RETURN them). */
function initCode(runtime: string): string {
  const len = runtime.length / 2;
  return '0x' + hex([0x60, len, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, len, 0x60, 0x00, 0xf3]) + runtime;
}

describe('USD prices', () => {
  let anvil: { url: string; stop(): Promise<void> };
  let chain: JsonRpcProvider;
  let pool: EvmRpcPool;
  let feed: string;
  let anvilChain: { name: string; chainId: bigint; rpcUrl: string; family: string };
  /** The registry as the feed reader sees it: anvil, and a non-EVM chain. */
  const chains = {
    resolve: async (name: string) => {
      if (name === 'anvil') return anvilChain;
      if (name === 'bitcoin') return { ...anvilChain, name, family: 'bitcoin' };
      throw new Error('not a chain');
    },
  };
  const feedsOf = (address: string, chain = 'anvil') =>
    new Map([['ETH', { chain, address: address.toLowerCase() }]]);

  const setSlot = (slot: number, value: bigint) =>
    chain.send('anvil_setStorageAt', [feed, toBeHex(slot, 32), zeroPadValue(toBeHex(value), 32)]);
  /** A new round: `answer` with 8 decimals, updated `ageSeconds` ago by the chain's clock. */
  async function round(answer: bigint, ageSeconds = 0): Promise<void> {
    const block = await chain.getBlock('latest');
    await setSlot(1, 7n);
    await setSlot(2, answer);
    await setSlot(3, BigInt(block!.timestamp - ageSeconds));
  }

  beforeAll(async () => {
    anvil = await startMeshAnvil();
    chain = new JsonRpcProvider(anvil.url, 31337, { staticNetwork: true });
    pool = new EvmRpcPool(5000);
    anvilChain = { name: 'anvil', chainId: 31337n, rpcUrl: anvil.url, family: 'evm' };
    const hash = (await chain.send('eth_sendTransaction', [
      { from: DEV, data: initCode(AGGREGATOR_RUNTIME), gas: '0x100000' },
    ])) as string;
    const receipt = await chain.waitForTransaction(hash);
    feed = receipt!.contractAddress!;
    await setSlot(0, 8n);
  }, 60_000);
  afterAll(async () => {
    pool?.close();
    chain?.destroy();
    await anvil?.stop();
  });

  it('reads the aggregator’s latest round over the chain’s RPC', async () => {
    await round(300_012_345_678n);
    const prices = new ChainlinkPrices(feedsOf(feed), chains, pool);
    const p = await prices.price('ETH');
    expect(p).toMatchObject({ micros: 3_000_123_456n, source: `chainlink:${feed.toLowerCase()}` });
    expect(Math.abs(p!.updatedAt.getTime() - Date.now())).toBeLessThan(120_000);
    // No feed for the asset: this source has no price (another may).
    expect(await prices.price('BTC')).toBeUndefined();
    // A feed on a chain that is not registered, or not EVM, cannot be read: 503.
    for (const chain of ['base', 'bitcoin'])
      await expect(
        new ChainlinkPrices(feedsOf(feed, chain), chains, pool).price('ETH'),
      ).rejects.toMatchObject({
        type: PRICE_UNAVAILABLE,
      });
  });

  it('prefers the feed to the static table, and refuses a stale round, a non-positive answer or an unreadable feed', async () => {
    const table = new StaticPrices(new Map([['ETH', 1_000_000_000n]]));
    const oracle = (feeds: ReturnType<typeof feedsOf>) =>
      new PriceOracle([new ChainlinkPrices(feeds, chains, pool), table], 3_600_000);
    const feeds = feedsOf(feed);

    await round(250_000_000_000n);
    expect((await oracle(feeds).price('ETH')).micros).toBe(2_500_000_000n);
    await round(250_000_000_000n, 7200);
    await expect(oracle(feeds).price('ETH')).rejects.toMatchObject({
      kind: 'unavailable',
      type: PRICE_UNAVAILABLE,
    });
    await round(0n);
    await expect(oracle(feeds).price('ETH')).rejects.toMatchObject({ type: PRICE_UNAVAILABLE });
    // An address with no aggregator: the call answers nothing decodable.
    const none = feedsOf(`0x${'00'.repeat(19)}01`);
    await expect(oracle(none).price('ETH')).rejects.toMatchObject({ type: PRICE_UNAVAILABLE });
    // Without a feed the static table answers; without either, 503.
    expect((await oracle(new Map()).price('ETH')).micros).toBe(1_000_000_000n);
    await expect(oracle(new Map()).price('SOL')).rejects.toMatchObject({
      type: PRICE_UNAVAILABLE,
    });
  });
});
