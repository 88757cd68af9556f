import type { ChainFamily } from '../chains/chain-types.js';
import { CHAIN_FAMILIES } from '../chains/chain-types.js';

/**
 * A loaded sanctions list: normalized addresses per chain family (docs/screening.md). `publishedAt`
 * is the list's own publication time when the document states one; the loader falls back to when
 * the source was fetched (URL) or last written (file).
 */
export interface SanctionsList {
  name: string;
  publishedAt: Date | undefined;
  addresses: ReadonlyMap<ChainFamily, ReadonlySet<string>>;
  /** Entries whose currency tag maps to no chain family signer serves (XMR, LTC, ZEC, …). */
  skipped: number;
}

/** A sanctions document signer cannot read; `reason` names what is wrong (never its content). */
export class SanctionsListError extends Error {}

/**
 * OFAC's SDN currency tags ("Digital Currency Address - XBT …") and the family each belongs to.
 * Tokens that live on several chains (USDT, USDC) are placed by the address's own form.
 */
const CURRENCY_FAMILIES: Readonly<Record<string, ChainFamily | 'by_form'>> = {
  XBT: 'bitcoin',
  BTC: 'bitcoin',
  ETH: 'evm',
  ETC: 'evm',
  ARB: 'evm',
  BSC: 'evm',
  MATIC: 'evm',
  TRX: 'tron',
  XRP: 'xrp',
  SOL: 'solana',
  ADA: 'cardano',
  USDT: 'by_form',
  USDC: 'by_form',
};

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const BECH32ISH = /^(bc1|tb1|bcrt1|addr1|addr_test1|stake1|stake_test1)[0-9a-zA-Z]+$/i;
const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;

/** The family an address of a multi-chain token (USDT, USDC) belongs to, from its form. */
function familyByForm(address: string): ChainFamily | undefined {
  if (EVM_ADDRESS.test(address)) return 'evm';
  if (/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(address)) return 'tron';
  if (/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(address)) return 'solana';
  return undefined;
}

/**
 * The one spelling of an address the list and the screened request are compared in: EVM hex is
 * lowercased (EIP-55 checksums are only a case pattern); bech32 (Bitcoin `bc1…`, Cardano
 * `addr1…`) is lowercased, as bech32 readers canonicalize it; base58 addresses (Bitcoin legacy,
 * Solana, XRP, TRON) are case-sensitive and compared as written. Surrounding space is dropped.
 */
export function normalizeAddress(family: ChainFamily, address: string): string {
  const a = address.trim();
  if (family === 'evm') return a.toLowerCase();
  if (BECH32ISH.test(a)) return a.toLowerCase();
  return a;
}

/** True when `a` has the rough form of an address of `family` (a list entry otherwise is refused). */
function plausible(family: ChainFamily, a: string): boolean {
  if (a.length < 20 || a.length > 128) return false;
  if (family === 'evm') return EVM_ADDRESS.test(a);
  if (family === 'cardano' || family === 'bitcoin') return BECH32ISH.test(a) || BASE58.test(a);
  return BASE58.test(a);
}

function familyOf(tag: string): ChainFamily | 'by_form' | undefined {
  const t = tag.trim();
  if ((CHAIN_FAMILIES as readonly string[]).includes(t.toLowerCase())) return t.toLowerCase() as ChainFamily;
  return CURRENCY_FAMILIES[t.toUpperCase()];
}

class Builder {
  private readonly sets = new Map<ChainFamily, Set<string>>();
  skipped = 0;

  add(tag: string, rawAddress: string, where: string): void {
    const f = familyOf(tag);
    if (f === undefined) {
      this.skipped += 1;
      return;
    }
    const address = rawAddress.trim();
    const family = f === 'by_form' ? familyByForm(address) : f;
    if (!family) {
      this.skipped += 1;
      return;
    }
    if (!plausible(family, address)) {
      throw new SanctionsListError(`${where}: not a ${family} address`);
    }
    let set = this.sets.get(family);
    if (!set) this.sets.set(family, (set = new Set()));
    set.add(normalizeAddress(family, address));
  }

  build(name: string, publishedAt: Date | undefined): SanctionsList {
    return { name, publishedAt, addresses: this.sets, skipped: this.skipped };
  }
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

function checkedName(v: unknown, fallback: string): string {
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !NAME.test(v)) {
    throw new SanctionsListError('"name" must be 1-64 letters, digits, ".", "_", ":" or "-"');
  }
  return v;
}

/**
 * Reads the native JSON format (docs/screening.md):
 * `{"name": "…", "published_at": "<ISO 8601>", "addresses": {"<family or currency tag>": ["…"]}}`.
 */
export function parseJsonList(text: string, fallbackName: string): SanctionsList {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new SanctionsListError('the document is not JSON');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new SanctionsListError('the document must be a JSON object');
  }
  const o = doc as Record<string, unknown>;
  const name = checkedName(o['name'], fallbackName);
  let publishedAt: Date | undefined;
  if (o['published_at'] !== undefined) {
    const t = typeof o['published_at'] === 'string' ? Date.parse(o['published_at']) : NaN;
    if (!Number.isFinite(t)) throw new SanctionsListError('"published_at" must be an ISO 8601 time');
    publishedAt = new Date(t);
  }
  const addresses = o['addresses'];
  if (typeof addresses !== 'object' || addresses === null || Array.isArray(addresses)) {
    throw new SanctionsListError('"addresses" must be an object of arrays keyed by family or currency');
  }
  const b = new Builder();
  for (const [tag, list] of Object.entries(addresses as Record<string, unknown>)) {
    if (!Array.isArray(list)) throw new SanctionsListError(`addresses.${tag} must be an array`);
    list.forEach((a, i) => {
      if (typeof a !== 'string') throw new SanctionsListError(`addresses.${tag}[${i}] must be a string`);
      b.add(tag, a, `addresses.${tag}[${i}]`);
    });
  }
  return b.build(name, publishedAt);
}

/**
 * Reads OFAC's SDN list as published in CSV (`sdn.csv`, or the consolidated `cons_prim.csv`): the
 * digital currency addresses are in each entry's remarks, as `Digital Currency Address - <TAG>
 * <address>;`. The CSV carries no publication date (the loader uses the fetch or file time).
 */
export function parseOfacSdnCsv(text: string, fallbackName: string): SanctionsList {
  const b = new Builder();
  const re = /Digital Currency Address - ([A-Za-z0-9]{2,10})\s+([A-Za-z0-9_]{10,128})/g;
  let found = 0;
  for (const m of text.matchAll(re)) {
    found += 1;
    b.add(m[1]!, m[2]!, `SDN entry ${found}`);
  }
  if (found === 0 && !/^\s*-?\d+\s*,/m.test(text)) {
    throw new SanctionsListError('the document is not an OFAC SDN CSV (no entries)');
  }
  return b.build(fallbackName, undefined);
}

/** The formats SANCTIONS_LIST_FORMAT names. */
export const LIST_FORMATS = ['auto', 'json', 'ofac_sdn_csv'] as const;
export type ListFormat = (typeof LIST_FORMATS)[number];

/** Parses a document in `format` (`auto`: JSON when it starts with `{`, else OFAC SDN CSV). */
export function parseSanctionsList(text: string, format: ListFormat, fallbackName: string): SanctionsList {
  const json = format === 'json' || (format === 'auto' && text.trimStart().startsWith('{'));
  return json ? parseJsonList(text, fallbackName) : parseOfacSdnCsv(text, fallbackName);
}

/** How many addresses the list holds, per family (for the log line of a load). */
export function listCounts(list: SanctionsList): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [f, s] of list.addresses) out[f] = s.size;
  return out;
}
