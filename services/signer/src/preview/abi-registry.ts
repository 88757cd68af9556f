import {
  Fragment,
  FunctionFragment,
  Interface,
  Result,
  dataSlice,
  isHexString,
  type ErrorFragment,
} from 'ethers';
import { boundText } from './bound-text.js';
import type { CallKind, DecodedCall } from './preview-types.js';

/**
 * The ABIs the preview knows, by 4-byte selector. Decoding is ethers 6 `Interface` throughout:
 * nothing here reads ABI words by hand.
 *
 * Two selectors are shared by ERC-20 and ERC-721 (`transferFrom(address,address,uint256)` =
 * 0x23b872dd, `approve(address,uint256)` = 0x095ea7b3): their ERC-20 reading comes first and the
 * ERC-721 one is chosen only when the caller says the contract is ERC-721 (`standard: 'erc721'`,
 * which buildPreview learns from the contract's ERC-165 `supportsInterface(0x80ac58cd)`).
 */

interface Entry {
  fragment: FunctionFragment;
  /** What the call does to tokens, for the known token ABIs; undefined for a registered ABI. */
  kind?: CallKind;
  standard?: 'erc20' | 'erc721' | 'erc1155' | 'weth';
  builtin: boolean;
}

const BUILTIN: { sig: string; kind: CallKind; standard: Entry['standard'] }[] = [
  { sig: 'function transfer(address to, uint256 amount)', kind: 'erc20_transfer', standard: 'erc20' },
  { sig: 'function approve(address spender, uint256 amount)', kind: 'erc20_approve', standard: 'erc20' },
  {
    sig: 'function transferFrom(address from, address to, uint256 amount)',
    kind: 'erc20_transfer_from',
    standard: 'erc20',
  },
  {
    sig: 'function increaseAllowance(address spender, uint256 addedValue)',
    kind: 'erc20_increase_allowance',
    standard: 'erc20',
  },
  {
    sig: 'function transferFrom(address from, address to, uint256 tokenId)',
    kind: 'erc721_transfer',
    standard: 'erc721',
  },
  {
    sig: 'function approve(address to, uint256 tokenId)',
    kind: 'erc721_approve',
    standard: 'erc721',
  },
  {
    sig: 'function safeTransferFrom(address from, address to, uint256 tokenId)',
    kind: 'erc721_transfer',
    standard: 'erc721',
  },
  {
    sig: 'function safeTransferFrom(address from, address to, uint256 tokenId, bytes data)',
    kind: 'erc721_transfer',
    standard: 'erc721',
  },
  {
    sig: 'function setApprovalForAll(address operator, bool approved)',
    kind: 'set_approval_for_all',
    standard: 'erc721',
  },
  {
    sig: 'function safeTransferFrom(address from, address to, uint256 id, uint256 amount, bytes data)',
    kind: 'erc1155_transfer',
    standard: 'erc1155',
  },
  { sig: 'function deposit()', kind: 'weth_deposit', standard: 'weth' },
  { sig: 'function withdraw(uint256 wad)', kind: 'weth_withdraw', standard: 'weth' },
];

/** selector → readings, the first being the default. */
const bySelector = new Map<string, Entry[]>();
/** Custom errors of registered ABIs, for revert reasons. */
const errorFragments: ErrorFragment[] = [];

function add(entry: Entry): void {
  const sel = entry.fragment.selector.toLowerCase();
  const list = bySelector.get(sel) ?? [];
  if (entry.builtin) {
    list.push(entry);
  } else {
    // A registered ABI replaces an earlier registration of the same selector, never a builtin.
    const i = list.findIndex((e) => !e.builtin);
    if (list.some((e) => e.builtin)) return;
    if (i >= 0) list[i] = entry;
    else list.push(entry);
  }
  bySelector.set(sel, list);
}

for (const b of BUILTIN) {
  add({ fragment: FunctionFragment.from(b.sig), kind: b.kind, standard: b.standard, builtin: true });
}

/**
 * Adds ABIs to decode (human-readable fragments, e.g. `function swap(uint256 amountIn, address to)`
 * or `error Slippage(uint256 got)`). A selector already known from the builtin token ABIs keeps
 * its builtin reading; a later registration of another selector replaces an earlier one. A fragment
 * ethers cannot parse throws.
 */
export function registerAbi(fragments: string[]): void {
  // Fragment.from throws on a bad fragment; Interface alone would only log a warning and skip it.
  const iface = new Interface(fragments.map((f) => Fragment.from(f)));
  iface.forEachFunction((f) => add({ fragment: f, builtin: false }));
  iface.forEachError((e) => errorFragments.push(e));
}

/** The registered custom errors (for decoding revert data). */
export function registeredErrors(): readonly ErrorFragment[] {
  return errorFragments;
}

/** True when a reading of this selector exists for the ERC-721 standard (so a probe can decide). */
export function hasErc721Reading(selector: string): boolean {
  return (bySelector.get(selector.toLowerCase()) ?? []).some((e) => e.standard === 'erc721');
}

/** An ABI value as text: addresses checksummed (ethers), numbers decimal, bytes hex, lists JSON. */
function argText(v: unknown): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v instanceof Result) return JSON.stringify(plain(v.toArray()));
  return JSON.stringify(plain(v));
}

function plain(v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Result) return v.toArray().map(plain);
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

/**
 * The call that `data` makes, decoded by the known ABIs: undefined for empty data (`0x`), a call
 * with `name: null` for a selector no ABI knows (or data shorter than 4 bytes), and a call with
 * `decode_error` when a known selector's arguments do not decode. `standard: 'erc721'` picks the
 * ERC-721 reading of a selector ERC-20 shares.
 */
export function decodeCall(data: string, opts: { standard?: 'erc721' } = {}): DecodedCall | undefined {
  if (!data || data === '0x') return undefined;
  if (!isHexString(data)) {
    return { selector: null, name: null, signature: null, args: {}, decodeError: 'call data is not hex' };
  }
  if ((data.length - 2) / 2 < 4) {
    return { selector: data.toLowerCase(), name: null, signature: null, args: {} };
  }
  const selector = dataSlice(data, 0, 4).toLowerCase();
  const readings = bySelector.get(selector);
  if (!readings?.length) return { selector, name: null, signature: null, args: {} };
  const entry =
    (opts.standard && readings.find((e) => e.standard === opts.standard)) ||
    readings.find((e) => e.standard !== 'erc721') ||
    readings[0]!;
  const f = entry.fragment;
  const base = { selector, name: f.name, signature: f.format('sighash'), kind: entry.kind };
  try {
    const values = new Interface([f]).decodeFunctionData(f, data);
    const args: Record<string, string> = {};
    const raw: Record<string, unknown> = {};
    f.inputs.forEach((p, i) => {
      const name = p.name || `arg${i}`;
      // Bytes and strings are the agent's: bounded (size and keccak-256 past 2 KiB).
      args[name] = boundText(argText(values[i]));
      raw[name] = values[i];
    });
    return { ...base, args, values: raw };
  } catch (err) {
    const msg = (err as { shortMessage?: string }).shortMessage ?? 'the arguments do not decode';
    return { ...base, args: {}, decodeError: msg };
  }
}
