import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import {
  CHAIN_FAMILIES,
  type ChainChange,
  type ChainFamily,
  type ChainIdentifier,
  type ChainRecord,
  type NewChain,
} from './chain-types.js';

/** The native currency and decimals of a family, when an admin names none. */
export const FAMILY_DEFAULTS: Readonly<Record<ChainFamily, { currency: string; decimals: number }>> = {
  evm: { currency: 'ETH', decimals: 18 },
  bitcoin: { currency: 'BTC', decimals: 8 },
  solana: { currency: 'SOL', decimals: 9 },
  xrp: { currency: 'XRP', decimals: 6 },
  cardano: { currency: 'ADA', decimals: 6 },
  tron: { currency: 'TRX', decimals: 6 },
};

/**
 * The name a signing key of a family goes by (reference CreateSigningKeyRequest: `ethereum`,
 * `bitcoin` ...): one EVM key serves every EVM chain, as wallets do.
 */
export function keyNameOf(family: ChainFamily): string {
  return family === 'evm' ? 'ethereum' : family;
}

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const MAX_CHAIN_ID = 2n ** 53n - 1n;

/** True when `f` is a known family. */
export function isChainFamily(f: string): f is ChainFamily {
  return (CHAIN_FAMILIES as readonly string[]).includes(f);
}

/** A chain name as stored: lower-case letters, digits and hyphens, 1..63, not all digits. */
export function chainName(raw: string): string {
  const name = raw.trim().toLowerCase();
  if (!NAME.test(name) || /^\d+$/.test(name)) {
    throw new InvalidArgumentError(
      'name',
      'must be 1..63 lower-case letters, digits or hyphens, start with a letter or digit, and not be a number',
    );
  }
  return name;
}

/** A numeric chain id: a positive integer a JSON number can carry exactly. */
export function chainIdOf(raw: string | number | bigint, field = 'chain_id'): bigint {
  let n: bigint;
  try {
    n = BigInt(raw);
  } catch {
    throw new InvalidArgumentError(field, 'must be an integer');
  }
  if (n < 0n || n > MAX_CHAIN_ID)
    throw new InvalidArgumentError(field, `must be between 0 and ${MAX_CHAIN_ID}`);
  return n;
}

/**
 * A URL field: empty, or an absolute URL of one of `schemes` with a host and without spaces
 * (the registry hands it to clients and, for rpc_url, to signer's own calls).
 */
export function urlField(field: string, raw: string, schemes: readonly string[]): string {
  const v = raw.trim();
  if (v === '') return '';
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new InvalidArgumentError(field, 'must be an absolute URL');
  }
  if (!schemes.includes(u.protocol.slice(0, -1)) || !u.hostname) {
    throw new InvalidArgumentError(field, `must be a ${schemes.join(' or ')} URL`);
  }
  if (v.length > 2048) throw new InvalidArgumentError(field, 'must be at most 2048 characters');
  return v;
}

function displayName(raw: string): string {
  const v = raw.trim();
  if (v.length === 0 || v.length > 100)
    throw new InvalidArgumentError('display_name', 'must be 1..100 characters');
  return v;
}

function currency(raw: string): string {
  const v = raw.trim();
  if (!/^[A-Za-z0-9.]{1,12}$/.test(v)) {
    throw new InvalidArgumentError('native_currency', 'must be 1..12 letters, digits or dots');
  }
  return v;
}

/** What an admin's CreateChain asks for, checked; family defaults fill the currency. */
export function checkNewChain(req: {
  name: string;
  displayName: string;
  chainId: string | number | bigint;
  family: string;
  rpcUrl: string;
  wsUrl: string;
  explorerUrl: string;
  nativeCurrency: string;
  nativeDecimals?: number | undefined;
  isTestnet: boolean;
  isEnabled?: boolean | undefined;
}): NewChain {
  const family = req.family === '' ? 'evm' : req.family;
  if (!isChainFamily(family))
    throw new InvalidArgumentError('family', `must be one of ${CHAIN_FAMILIES.join(', ')}`);
  const d = FAMILY_DEFAULTS[family];
  const decimals = req.nativeDecimals ?? d.decimals;
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 36) {
    throw new InvalidArgumentError('native_decimals', 'must be an integer 0..36');
  }
  return {
    name: chainName(req.name),
    displayName: displayName(req.displayName),
    chainId: chainIdOf(req.chainId),
    family,
    rpcUrl: urlField('rpc_url', req.rpcUrl, ['http', 'https']),
    wsUrl: urlField('ws_url', req.wsUrl, ['ws', 'wss']),
    explorerUrl: urlField('explorer_url', req.explorerUrl, ['http', 'https']),
    nativeCurrency: req.nativeCurrency.trim() === '' ? d.currency : currency(req.nativeCurrency),
    nativeDecimals: decimals,
    isTestnet: req.isTestnet,
    isEnabled: req.isEnabled ?? true,
  };
}

/** What an admin's UpdateChain asks for, checked; absent fields stay as they are. */
export function checkChainChange(req: {
  displayName?: string | undefined;
  rpcUrl?: string | undefined;
  wsUrl?: string | undefined;
  explorerUrl?: string | undefined;
  nativeCurrency?: string | undefined;
  isTestnet?: boolean | undefined;
  isEnabled?: boolean | undefined;
}): ChainChange {
  const c: ChainChange = {};
  if (req.displayName !== undefined) c.displayName = displayName(req.displayName);
  if (req.rpcUrl !== undefined) c.rpcUrl = urlField('rpc_url', req.rpcUrl, ['http', 'https']);
  if (req.wsUrl !== undefined) c.wsUrl = urlField('ws_url', req.wsUrl, ['ws', 'wss']);
  if (req.explorerUrl !== undefined)
    c.explorerUrl = urlField('explorer_url', req.explorerUrl, ['http', 'https']);
  if (req.nativeCurrency !== undefined) c.nativeCurrency = currency(req.nativeCurrency);
  if (req.isTestnet !== undefined) c.isTestnet = req.isTestnet;
  if (req.isEnabled !== undefined) c.isEnabled = req.isEnabled;
  return c;
}

/** Reads how a caller names a chain: a UUID, a decimal chain id, or a name (any case). */
export function parseChainIdentifier(raw: string, field = 'chain'): ChainIdentifier {
  const v = raw.trim();
  if (v === '') throw new InvalidArgumentError(field, 'is required');
  if (isUuid(v)) return { kind: 'uuid', id: v.toLowerCase() };
  if (/^\d{1,16}$/.test(v)) return { kind: 'number', chainId: chainIdOf(v, field) };
  if (v.length > 63) throw new InvalidArgumentError(field, 'is not a chain name, chain id or UUID');
  return { kind: 'name', name: v.toLowerCase() };
}

/**
 * The chain `id` names among `chains`. A number several families share (a Tron id equal to an EVM
 * one an admin added) names the EVM chain: numbers are EVM's way of naming chains; others go by name.
 */
export function findChain<T extends Pick<ChainRecord, 'id' | 'name' | 'chainId' | 'family'>>(
  chains: readonly T[],
  id: ChainIdentifier,
): T | undefined {
  switch (id.kind) {
    case 'uuid':
      return chains.find((c) => c.id === id.id);
    case 'name':
      return chains.find((c) => c.name === id.name);
    case 'number': {
      const hits = chains.filter((c) => c.chainId === id.chainId);
      return hits.find((c) => c.family === 'evm') ?? hits[0];
    }
  }
}

/**
 * Reads CHAIN_RPC_URLS: comma-separated `name=url` pairs (`ethereum=https://…,base=https://…`).
 * Each URL must be http(s); a name may appear once.
 */
export function parseRpcUrlMap(raw: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of raw.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) throw new Error(`CHAIN_RPC_URLS: "${item.slice(0, 40)}" is not name=url`);
    const name = item.slice(0, eq).trim().toLowerCase();
    if (out.has(name)) throw new Error(`CHAIN_RPC_URLS: ${name} appears twice`);
    const url = item.slice(eq + 1).trim();
    try {
      out.set(name, urlField('rpc_url', url, ['http', 'https']));
    } catch {
      throw new Error(`CHAIN_RPC_URLS: the URL of ${name} is not an http(s) URL`);
    }
  }
  return out;
}

/**
 * A chain's endpoints as the caller may see them: a provider's URL often carries its API key, so
 * only a platform admin (who sets them) reads `rpc_url` and `ws_url`; everyone learns whether a
 * JSON-RPC endpoint is configured.
 */
export function endpointsFor(
  c: Pick<ChainRecord, 'rpcUrl' | 'wsUrl'>,
  platformAdmin: boolean,
): { rpcUrl: string; wsUrl: string; rpcConfigured: boolean } {
  return {
    rpcUrl: platformAdmin ? c.rpcUrl : '',
    wsUrl: platformAdmin ? c.wsUrl : '',
    rpcConfigured: c.rpcUrl !== '',
  };
}
