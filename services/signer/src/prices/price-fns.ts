import { InvalidArgumentError } from '@custos/service-kit';

// Money values of issue 20's USD caps: prices and amounts in USD micros (millionths of a dollar)
// as bigint, so sums never lose a cent to floating point.

/** One US dollar in micros. */
export const USD_MICROS = 1_000_000n;

const DECIMAL_USD = /^(\d{1,15})(?:\.(\d{1,6}))?$/;
const ASSET = /^[A-Z0-9]{1,16}$/;
const CHAIN = /^[a-z0-9_-]{1,40}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** A decimal USD amount (`"3000.25"`, at most six decimals) in micros; null when malformed. */
export function usdMicrosOfDecimal(v: string): bigint | null {
  const m = DECIMAL_USD.exec(v.trim());
  if (!m) return null;
  return BigInt(m[1]!) * USD_MICROS + BigInt((m[2] ?? '').padEnd(6, '0'));
}

/** Micros as a decimal USD string, without trailing zeros (`"12.5"`). */
export function usdDecimalOf(micros: bigint): string {
  const sign = micros < 0n ? '-' : '';
  const abs = micros < 0n ? -micros : micros;
  const frac = (abs % USD_MICROS).toString().padStart(6, '0').replace(/0+$/, '');
  return `${sign}${abs / USD_MICROS}${frac ? `.${frac}` : ''}`;
}

/**
 * The static price table of PRICE_TABLE_USD: `ETH=3000.25,BTC=65000` (asset symbols upper-case,
 * prices in USD). A malformed entry is refused when the service starts, naming the variable.
 */
export function parsePriceTable(v: string | undefined, variable = 'PRICE_TABLE_USD'): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const entry of (v ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [asset, price, ...rest] = entry.split('=');
    const micros = price !== undefined ? usdMicrosOfDecimal(price) : null;
    if (rest.length || !asset || !ASSET.test(asset) || micros === null || micros <= 0n)
      throw new InvalidArgumentError(
        variable,
        `${variable}: "${entry}" is not ASSET=price (e.g. ETH=3000.25)`,
      );
    out.set(asset, micros);
  }
  return out;
}

/** Where a Chainlink AggregatorV3 for an asset's USD price is read: an EVM chain and the contract. */
export interface FeedRef {
  chain: string;
  address: string;
}

/**
 * The Chainlink feeds of CHAINLINK_FEEDS: `ETH=ethereum:0x5f4e…,BTC=ethereum:0xF403…` — for each
 * asset, the EVM chain (a registry name) whose AggregatorV3 gives its USD price. The asset may be
 * spent on any chain (BTC on bitcoin is priced by a feed on ethereum).
 */
export function parseFeeds(v: string | undefined, variable = 'CHAINLINK_FEEDS'): Map<string, FeedRef> {
  const out = new Map<string, FeedRef>();
  for (const entry of (v ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const m = /^([^=]+)=([^:]+):(.+)$/.exec(entry);
    if (!m || !ASSET.test(m[1]!) || !CHAIN.test(m[2]!) || !ADDRESS.test(m[3]!))
      throw new InvalidArgumentError(
        variable,
        `${variable}: "${entry}" is not ASSET=chain:0xaggregator (e.g. ETH=ethereum:0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419)`,
      );
    out.set(m[1]!, { chain: m[2]!, address: m[3]!.toLowerCase() });
  }
  return out;
}

/** USDC_CONTRACTS: `ethereum=0xA0b8…,base=0x8335…`, each chain's USDC contract, lowercased. */
export function parseUsdcContracts(v: string | undefined, variable = 'USDC_CONTRACTS'): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of (v ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [chain, address, ...rest] = entry.split('=');
    if (rest.length || !chain || !CHAIN.test(chain) || !address || !ADDRESS.test(address))
      throw new InvalidArgumentError(variable, `${variable}: "${entry}" is not chain=0xcontract`);
    out.set(chain, address.toLowerCase());
  }
  return out;
}

/**
 * The USD value, in micros, of `amount` smallest units of an asset with `decimals` decimals priced
 * at `priceMicros` per whole unit, rounded up (a cap errs towards counting a little more).
 */
export function usdValueMicros(amount: bigint, decimals: number, priceMicros: bigint): bigint {
  if (amount <= 0n) return 0n;
  const scale = 10n ** BigInt(decimals);
  return (amount * priceMicros + scale - 1n) / scale;
}

/** A Chainlink answer with `decimals` decimals in USD micros (rounded down), or null when not positive. */
export function microsOfAnswer(answer: bigint, decimals: number): bigint | null {
  if (answer <= 0n) return null;
  return decimals >= 6 ? answer / 10n ** BigInt(decimals - 6) : answer * 10n ** BigInt(6 - decimals);
}
