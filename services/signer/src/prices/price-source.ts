import { Interface } from 'ethers';
import { CustosError } from '@custos/service-kit';
import type { EvmRpc } from '../evm/evm-rpc.js';
import { type FeedRef, microsOfAnswer } from './price-fns.js';

/** The problem type of a value that cannot be priced (SPEC: stale or missing prices refuse). */
export const PRICE_UNAVAILABLE = 'price_unavailable';

/** 503 `price_unavailable`: a cap cannot be checked without a price, and a price is never guessed. */
export function priceUnavailable(detail: string): CustosError {
  return new CustosError('unavailable', { type: PRICE_UNAVAILABLE, detail });
}

/** A chain a feed is read on, as the registry holds it. */
export interface FeedChain {
  name: string;
  chainId: bigint;
  rpcUrl: string;
  family: string;
}

/** An asset's USD price and when its source last updated it. */
export interface Price {
  /** USD micros per whole unit of the asset. */
  micros: bigint;
  updatedAt: Date;
  /** `static` or `chainlink:<aggregator>`. */
  source: string;
}

/** Where USD prices come from. */
export interface PriceSource {
  /** The asset's price (a currency symbol such as `ETH`), or undefined when this source has none. */
  price(asset: string): Promise<Price | undefined>;
}

/** The operator's table (PRICE_TABLE_USD): fixed prices, as fresh as the configuration. */
export class StaticPrices implements PriceSource {
  constructor(private readonly table: ReadonlyMap<string, bigint>) {}
  /** A configured price is as fresh as the configuration: never stale by age. */
  async price(asset: string): Promise<Price | undefined> {
    const micros = this.table.get(asset);
    return micros === undefined ? undefined : { micros, updatedAt: new Date(), source: 'static' };
  }
}

const AGGREGATOR = new Interface([
  'function decimals() view returns (uint8)',
  'function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)',
]);
const ZERO = '0x0000000000000000000000000000000000000000';

/**
 * Chainlink AggregatorV3 feeds read over the chain's own RPC (CHAINLINK_FEEDS): `latestRoundData()`
 * and `decimals()` by eth_call. A call that fails, reverts or answers a non-positive price is
 * 503: a price is never guessed.
 */
export class ChainlinkPrices implements PriceSource {
  constructor(
    private readonly feeds: ReadonlyMap<string, FeedRef>,
    private readonly chains: { resolve(name: string, field: string): Promise<FeedChain> },
    private readonly rpc: { forChain(chain: FeedChain): Pick<EvmRpc, 'call'> },
  ) {}

  async price(asset: string): Promise<Price | undefined> {
    const ref = this.feeds.get(asset);
    if (!ref) return undefined;
    const feed = ref.address;
    let chain: FeedChain;
    try {
      chain = await this.chains.resolve(ref.chain, 'chain');
    } catch {
      throw priceUnavailable(`the ${asset} price feed's chain ${ref.chain} is not a registered chain`);
    }
    if (chain.family !== 'evm')
      throw priceUnavailable(`the ${asset} price feed's chain ${ref.chain} is not an EVM chain`);
    const rpc = this.rpc.forChain(chain);
    const call = async (fn: 'decimals' | 'latestRoundData') => {
      const r = await rpc.call({ from: ZERO, to: feed, value: 0n, data: AGGREGATOR.encodeFunctionData(fn) });
      if (!r.ok) throw new Error(`reverted: ${r.reason}`);
      return AGGREGATOR.decodeFunctionResult(fn, r.data);
    };
    let decimals: bigint;
    let round: { answer: bigint; updatedAt: bigint };
    try {
      [[decimals], round] = (await Promise.all([call('decimals'), call('latestRoundData')])) as unknown as [
        [bigint],
        { answer: bigint; updatedAt: bigint },
      ];
    } catch (err) {
      throw priceUnavailable(
        `the ${asset} price feed on ${chain.name} could not be read (${String((err as Error).message ?? err).slice(0, 200)}); nothing is valued without a price`,
      );
    }
    const micros = microsOfAnswer(round.answer, Number(decimals));
    if (micros === null)
      throw priceUnavailable(`the ${asset} price feed on ${chain.name} answered no positive price`);
    return { micros, updatedAt: new Date(Number(round.updatedAt) * 1000), source: `chainlink:${feed}` };
  }
}

/**
 * The price the caps use: the asset's Chainlink feed when one is configured, else the
 * static table; a price older than `maxAgeMs` or none at all is 503 `price_unavailable`.
 */
export class PriceOracle {
  constructor(
    private readonly sources: readonly PriceSource[],
    private readonly maxAgeMs: number,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  async price(asset: string): Promise<Price> {
    for (const s of this.sources) {
      const p = await s.price(asset);
      if (!p) continue;
      const age = this.clock().getTime() - p.updatedAt.getTime();
      if (age > this.maxAgeMs)
        throw priceUnavailable(
          `the ${asset} price (${p.source}) is ${Math.round(age / 1000)} s old, over the ${Math.round(this.maxAgeMs / 1000)} s allowed; nothing is valued until it is updated`,
        );
      return p;
    }
    throw priceUnavailable(`no USD price of ${asset} is configured (CHAINLINK_FEEDS or PRICE_TABLE_USD)`);
  }
}
