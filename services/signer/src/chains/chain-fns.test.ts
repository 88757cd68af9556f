import { InvalidArgumentError } from '@custos/service-kit';
import {
  checkChainChange,
  checkNewChain,
  endpointsFor,
  findChain,
  parseChainIdentifier,
  parseRpcUrlMap,
} from './chain-fns.js';
import { SEED_CHAINS, localChain } from './chain-seeds.js';

const registry = [...SEED_CHAINS, localChain('http://127.0.0.1:8545')].map((c, i) => ({
  ...c,
  id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
}));

function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidArgumentError);
    return (err as InvalidArgumentError & { field?: string }).field ?? (err as Error).message;
  }
  return undefined;
}

describe('parseChainIdentifier and findChain', () => {
  it('finds a chain by name in any case, by numeric chain id and by UUID', () => {
    expect(findChain(registry, parseChainIdentifier('Ethereum'))?.chainId).toBe(1n);
    expect(findChain(registry, parseChainIdentifier('8453'))?.name).toBe('base');
    expect(findChain(registry, parseChainIdentifier('31337'))?.name).toBe('anvil');
    const sepolia = registry.find((c) => c.name === 'sepolia')!;
    expect(findChain(registry, parseChainIdentifier(sepolia.id.toUpperCase()))?.name).toBe('sepolia');
    expect(findChain(registry, parseChainIdentifier('bitcoin'))?.family).toBe('bitcoin');
  });

  it('answers nothing for an unknown name or number', () => {
    expect(findChain(registry, parseChainIdentifier('dogechain'))).toBeUndefined();
    expect(findChain(registry, parseChainIdentifier('999999'))).toBeUndefined();
    expect(findChain(registry, parseChainIdentifier('00000000-0000-4000-8000-999999999999'))).toBeUndefined();
  });

  it('prefers the EVM chain when families share a number', () => {
    const clash = [
      { id: 'a', name: 'tron-like', chainId: 195n, family: 'tron' as const },
      { id: 'b', name: 'x-layer-testnet', chainId: 195n, family: 'evm' as const },
    ];
    expect(findChain(clash, parseChainIdentifier('195'))?.name).toBe('x-layer-testnet');
  });

  it('refuses an empty identifier, naming the field', () => {
    expect(fieldOf(() => parseChainIdentifier('  ', 'chain'))).toMatch(/chain/);
  });
});

describe('the seed chains', () => {
  it('hold the six EVM chains with their EIP-155 ids and the five other families', () => {
    const evm = Object.fromEntries(
      SEED_CHAINS.filter((c) => c.family === 'evm').map((c) => [c.name, c.chainId]),
    );
    expect(evm).toEqual({
      ethereum: 1n,
      sepolia: 11155111n,
      base: 8453n,
      optimism: 10n,
      arbitrum: 42161n,
      polygon: 137n,
    });
    expect(
      SEED_CHAINS.filter((c) => c.family !== 'evm')
        .map((c) => c.family)
        .sort(),
    ).toEqual(['bitcoin', 'cardano', 'solana', 'tron', 'xrp']);
    // Names and (family, chain id) are unique, as the table requires.
    expect(new Set(SEED_CHAINS.map((c) => c.name)).size).toBe(SEED_CHAINS.length);
    expect(new Set(SEED_CHAINS.map((c) => `${c.family}:${c.chainId}`)).size).toBe(SEED_CHAINS.length);
    expect(SEED_CHAINS.every((c) => c.rpcUrl === '')).toBe(true);
  });

  it('makes the local chain an enabled testnet 31337 at the given URL', () => {
    expect(localChain('http://127.0.0.1:9999')).toMatchObject({
      name: 'anvil',
      chainId: 31337n,
      family: 'evm',
      isTestnet: true,
      isEnabled: true,
      rpcUrl: 'http://127.0.0.1:9999',
    });
  });
});

describe('checkNewChain and checkChainChange', () => {
  const base = {
    name: 'Linea',
    displayName: 'Linea',
    chainId: 59144,
    family: '',
    rpcUrl: 'https://rpc.linea.build',
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: '',
    isTestnet: false,
  };

  it('fills the family defaults and lower-cases the name', () => {
    expect(checkNewChain(base)).toMatchObject({
      name: 'linea',
      family: 'evm',
      chainId: 59144n,
      nativeCurrency: 'ETH',
      nativeDecimals: 18,
      isEnabled: true,
    });
  });

  it('names the field at fault', () => {
    expect(fieldOf(() => checkNewChain({ ...base, name: 'has space' }))).toMatch(/name/);
    expect(fieldOf(() => checkNewChain({ ...base, name: '12345' }))).toMatch(/name/);
    expect(fieldOf(() => checkNewChain({ ...base, family: 'dogecoin' }))).toMatch(/family/);
    expect(fieldOf(() => checkNewChain({ ...base, rpcUrl: 'ftp://x.example' }))).toMatch(/rpc_url/);
    expect(fieldOf(() => checkNewChain({ ...base, wsUrl: 'https://x.example' }))).toMatch(/ws_url/);
    expect(fieldOf(() => checkNewChain({ ...base, chainId: -1 }))).toMatch(/chain_id/);
    expect(fieldOf(() => checkNewChain({ ...base, displayName: '' }))).toMatch(/display_name/);
    expect(fieldOf(() => checkChainChange({ explorerUrl: 'not a url' }))).toMatch(/explorer_url/);
  });

  it('keeps only the fields present in a change; empty URLs clear', () => {
    expect(checkChainChange({ isEnabled: false, rpcUrl: '' })).toEqual({ isEnabled: false, rpcUrl: '' });
  });
});

describe('parseRpcUrlMap (CHAIN_RPC_URLS)', () => {
  it('reads name=url pairs', () => {
    expect([...parseRpcUrlMap(' ethereum=https://eth.example/v3/k , Base=https://base.example ')]).toEqual([
      ['ethereum', 'https://eth.example/v3/k'],
      ['base', 'https://base.example'],
    ]);
    expect(parseRpcUrlMap('').size).toBe(0);
  });

  it('refuses malformed entries without echoing a URL', () => {
    expect(() => parseRpcUrlMap('ethereum')).toThrow(/name=url/);
    expect(() => parseRpcUrlMap('a=https://x.example,a=https://y.example')).toThrow(/twice/);
    expect(() => parseRpcUrlMap('a=ftp://secret-key@x.example')).toThrow(/not an http\(s\) URL/);
    expect(() => parseRpcUrlMap('a=ftp://secret-key@x.example')).not.toThrow(/secret-key/);
  });
});

describe('endpointsFor', () => {
  const chain = { rpcUrl: 'https://eth.example/v2/KEY-canary', wsUrl: 'wss://eth.example/v2/KEY-canary' };

  it('shows the endpoints to a platform admin only; everyone learns whether one is configured', () => {
    expect(endpointsFor(chain, true)).toEqual({ ...chain, rpcConfigured: true });
    expect(endpointsFor(chain, false)).toEqual({ rpcUrl: '', wsUrl: '', rpcConfigured: true });
    expect(endpointsFor({ rpcUrl: '', wsUrl: '' }, false).rpcConfigured).toBe(false);
    expect(endpointsFor({ rpcUrl: '', wsUrl: '' }, true).rpcConfigured).toBe(false);
  });
});
