import { FAMILY_DEFAULTS } from './chain-fns.js';
import type { NewChain } from './chain-types.js';

const evm = (
  name: string,
  displayName: string,
  chainId: number,
  explorerUrl: string,
  isTestnet = false,
): NewChain => ({
  name,
  displayName,
  chainId: BigInt(chainId),
  family: 'evm',
  rpcUrl: '',
  wsUrl: '',
  explorerUrl,
  nativeCurrency: name === 'polygon' ? 'POL' : 'ETH',
  nativeDecimals: 18,
  isTestnet,
  isEnabled: true,
});

const other = (
  family: Exclude<NewChain['family'], 'evm'>,
  displayName: string,
  chainId: number,
  explorerUrl: string,
): NewChain => ({
  name: family,
  displayName,
  chainId: BigInt(chainId),
  family,
  rpcUrl: '',
  wsUrl: '',
  explorerUrl,
  nativeCurrency: FAMILY_DEFAULTS[family].currency,
  nativeDecimals: FAMILY_DEFAULTS[family].decimals,
  isTestnet: false,
  isEnabled: true,
});

/**
 * The chains every install starts with (inserted at start-up when their name is missing; an
 * admin's later edits are kept). No RPC URL: an install names its own (CHAIN_RPC_URLS), so nothing
 * reaches a third party unless an operator chose it. Non-EVM chains carry their SLIP-44 coin type as
 * `chain_id` (Tron its EVM-style id 728126428), since they have no EIP-155 number.
 */
export const SEED_CHAINS: readonly NewChain[] = [
  evm('ethereum', 'Ethereum Mainnet', 1, 'https://etherscan.io'),
  evm('sepolia', 'Ethereum Sepolia', 11155111, 'https://sepolia.etherscan.io', true),
  evm('base', 'Base', 8453, 'https://basescan.org'),
  evm('optimism', 'OP Mainnet', 10, 'https://optimistic.etherscan.io'),
  evm('arbitrum', 'Arbitrum One', 42161, 'https://arbiscan.io'),
  evm('polygon', 'Polygon PoS', 137, 'https://polygonscan.com'),
  other('bitcoin', 'Bitcoin', 0, 'https://mempool.space'),
  other('solana', 'Solana', 501, 'https://explorer.solana.com'),
  other('xrp', 'XRP Ledger', 144, 'https://livenet.xrpl.org'),
  other('cardano', 'Cardano', 1815, 'https://cardanoscan.io'),
  other('tron', 'Tron', 728126428, 'https://tronscan.org'),
];

/** The local dev/test chain (anvil), registered when LOCAL_EVM_RPC_URL is set. */
export function localChain(rpcUrl: string): NewChain {
  return { ...evm('anvil', 'Local EVM (anvil)', 31337, '', true), rpcUrl };
}
