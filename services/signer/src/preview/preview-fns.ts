import { Interface, formatUnits, getAddress, isHexString } from 'ethers';
import { registeredErrors } from './abi-registry.js';
import type {
  DecodedCall,
  PrestateDiff,
  PreviewFlag,
  PreviewSummary,
  TokenTransferJson,
} from './preview-types.js';

/** 2^255: an allowance at or above it is "unlimited" (MaxUint256 and the usual near-max values). */
export const UNLIMITED_ALLOWANCE = 1n << 255n;

/** An amount in major units as a decimal string without a trailing `.0` (`1000000000000000000` → `"1"`). */
export function majorUnits(raw: bigint, decimals: number): string {
  return canonicalDecimal(formatUnits(raw, decimals));
}

/** A decimal string without leading zeros of the integer or trailing zeros of the fraction. */
export function canonicalDecimal(s: string): string {
  let [whole = '0', frac = ''] = s.split('.');
  whole = whole.replace(/^0+(?=\d)/, '');
  frac = frac.replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : whole;
}

function addr(v: unknown): string {
  return typeof v === 'string' ? v : String(v);
}

/**
 * The token movement or permission of a decoded known token call on contract `to` (null for other
 * calls). WETH deposit's recipient is the sender and its amount the value sent.
 */
export function tokenTransferOf(
  call: DecodedCall | undefined,
  to: string,
  from: string,
  valueWei: bigint,
): TokenTransferJson | null {
  if (!call?.kind || !call.values) return null;
  const v = call.values;
  const token = to;
  switch (call.kind) {
    case 'erc20_transfer':
      return { token, recipient: addr(v.to), amount_raw: String(v.amount), kind: call.kind };
    case 'erc20_approve':
    case 'erc20_increase_allowance':
      return {
        token,
        recipient: addr(v.spender),
        amount_raw: String(v.amount ?? v.addedValue),
        kind: call.kind,
      };
    case 'erc20_transfer_from':
      return {
        token,
        recipient: addr(v.to),
        owner: addr(v.from),
        amount_raw: String(v.amount),
        kind: call.kind,
      };
    case 'erc721_transfer':
      return {
        token,
        recipient: addr(v.to),
        owner: addr(v.from),
        amount_raw: '1',
        token_id: String(v.tokenId),
        kind: call.kind,
      };
    case 'erc721_approve':
      return { token, recipient: addr(v.to), amount_raw: '1', token_id: String(v.tokenId), kind: call.kind };
    case 'set_approval_for_all':
      return {
        token,
        recipient: addr(v.operator),
        amount_raw: null,
        approved: v.approved === true,
        kind: call.kind,
      };
    case 'erc1155_transfer':
      return {
        token,
        recipient: addr(v.to),
        owner: addr(v.from),
        amount_raw: String(v.amount),
        token_id: String(v.id),
        kind: call.kind,
      };
    case 'weth_deposit':
      return { token, recipient: from, amount_raw: valueWei.toString(), kind: call.kind };
    case 'weth_withdraw':
      return { token, recipient: from, amount_raw: String(v.wad), kind: call.kind };
  }
}

// 0x + 40 hex not inside a longer hex run (a 32-byte hash is not an address).
const ADDRESS_IN_TEXT = /(?<![0-9a-zA-Z])0x[0-9a-fA-F]{40}(?![0-9a-fA-F])/g;

/** The EVM-shaped addresses (0x + 40 hex) a summary's title, body and field values name, lowercased. */
export function summaryAddresses(s: PreviewSummary): string[] {
  const texts = [s.title, s.body, ...s.fields.map((f) => f.value)];
  const found = new Set<string>();
  for (const t of texts) for (const m of (t ?? '').matchAll(ADDRESS_IN_TEXT)) found.add(m[0].toLowerCase());
  return [...found];
}

/** summary_recipient_mismatch: addresses the summary names that the payload does not involve. */
export function recipientFlag(s: PreviewSummary | undefined, allowed: string[]): PreviewFlag | undefined {
  if (!s) return undefined;
  const ok = new Set(allowed.filter(Boolean).map((a) => a.toLowerCase()));
  const others = summaryAddresses(s).filter((a) => !ok.has(a));
  if (others.length === 0) return undefined;
  return {
    code: 'summary_recipient_mismatch',
    detail: `the summary names ${others.map(safeAddress).join(', ')}, which is not the recipient, the contract or the sender of this transaction`,
  };
}

function safeAddress(a: string): string {
  try {
    return getAddress(a);
  } catch {
    return a;
  }
}

const AMOUNT_LABEL = /amount|value/i;
// A decimal number, thousands separated by commas or underscores allowed; not part of a word or hex.
const NUMBER_IN_TEXT = /(?<![0-9A-Za-z_.])\d[\d,_]*(?:\.\d+)?/g;

/** The numbers in a field value, as canonical decimals (addresses and hex removed first). */
export function numbersIn(text: string): string[] {
  const cleaned = text.replace(/0x[0-9a-fA-F]*/g, ' ');
  return [...cleaned.matchAll(NUMBER_IN_TEXT)].map((m) => canonicalDecimal(m[0].replace(/[,_]/g, '')));
}

/**
 * summary_amount_mismatch: a field labelled like amount/value holds numbers none of which is one
 * of `candidates` (canonical decimals). Fields without a number are not checked.
 */
export function amountFlag(s: PreviewSummary | undefined, candidates: string[]): PreviewFlag | undefined {
  if (!s || candidates.length === 0) return undefined;
  const ok = new Set(candidates);
  for (const f of s.fields) {
    if (!AMOUNT_LABEL.test(f.label)) continue;
    const nums = numbersIn(f.value ?? '');
    if (nums.length > 0 && !nums.some((n) => ok.has(n))) {
      return {
        code: 'summary_amount_mismatch',
        detail: `the summary's "${f.label.slice(0, 64)}" (${f.value.slice(0, 100)}) matches neither the value sent nor the token amount`,
      };
    }
  }
  return undefined;
}

/** The amounts a summary may state for a transaction: native value in major units, token amount raw and scaled. */
export function amountCandidates(
  valueWei: bigint,
  nativeDecimals: number,
  token: TokenTransferJson | null,
): string[] {
  const c = [majorUnits(valueWei, nativeDecimals)];
  if (token?.amount_raw != null) {
    const raw = BigInt(token.amount_raw);
    c.push(raw.toString(), majorUnits(raw, 6), majorUnits(raw, 18));
    if (token.decimals !== undefined) c.push(majorUnits(raw, token.decimals));
  }
  if (token?.token_id !== undefined) c.push(token.token_id);
  return [...new Set(c)];
}

/** unlimited_approval: an ERC-20 allowance ≥ 2^255, or setApprovalForAll(operator, true). */
export function unlimitedFlag(token: TokenTransferJson | null): PreviewFlag | undefined {
  if (!token) return undefined;
  if (
    (token.kind === 'erc20_approve' || token.kind === 'erc20_increase_allowance') &&
    token.amount_raw !== null &&
    BigInt(token.amount_raw) >= UNLIMITED_ALLOWANCE
  ) {
    return {
      code: 'unlimited_approval',
      detail: `unlimited allowance of token ${token.token} for ${token.recipient}`,
    };
  }
  if (token.kind === 'set_approval_for_all' && token.approved) {
    return {
      code: 'unlimited_approval',
      detail: `${token.recipient} may move every token of collection ${token.token} held by the sender`,
    };
  }
  return undefined;
}

/** value_and_call: native value sent along a token call (WETH deposit excepted: that is how it works). */
export function valueAndCallFlag(valueWei: bigint, token: TokenTransferJson | null): PreviewFlag | undefined {
  if (valueWei <= 0n || !token || token.kind === 'weth_deposit') return undefined;
  return {
    code: 'value_and_call',
    detail: `native value ${valueWei.toString()} (smallest unit) is sent along a ${token.kind} call`,
  };
}

/** A revert's reason from its data: Error(string), Panic(uint256), a registered custom error; undefined otherwise. */
export function decodeRevert(data: string | undefined): string | undefined {
  if (!data || data === '0x' || !isHexString(data) || data.length < 10) return undefined;
  try {
    const e = new Interface([...registeredErrors()]).parseError(data);
    if (!e) return undefined;
    if (e.name === 'Error') return String(e.args[0]);
    if (e.name === 'Panic')
      return `panic 0x${(e.args[0] as bigint).toString(16)}${panicText(e.args[0] as bigint)}`;
    return `${e.signature} ${JSON.stringify(e.args.toArray().map((a: unknown) => (typeof a === 'bigint' ? a.toString() : a)))}`;
  } catch {
    return undefined;
  }
}

const PANICS: Record<string, string> = {
  '1': 'assertion failed',
  '17': 'arithmetic overflow or underflow',
  '18': 'division or modulo by zero',
  '33': 'invalid enum value',
  '34': 'invalid storage byte array',
  '49': 'pop on empty array',
  '50': 'array index out of bounds',
  '65': 'out of memory',
  '81': 'call to an uninitialized function',
};

function panicText(code: bigint): string {
  const t = PANICS[code.toString()];
  return t ? ` (${t})` : '';
}

/** One account's balance change in the simulation. */
export interface BalanceChange {
  address: string;
  before_wei: string;
  after_wei: string;
  delta_wei: string;
}

/**
 * Balance changes from a prestateTracer diff: an account in `post` with a balance changed from
 * `pre`'s (0 when absent: a new account); one in `pre` but not in `post` was deleted (after 0).
 * Unchanged balances are left out; the sender first, then by address.
 */
export function balanceChanges(diff: PrestateDiff, from: string): BalanceChange[] {
  const pre = lower(diff.pre ?? {});
  const post = lower(diff.post ?? {});
  const out: BalanceChange[] = [];
  for (const a of new Set([...Object.keys(pre), ...Object.keys(post)])) {
    const before = BigInt(pre[a]?.balance ?? '0x0');
    let after: bigint;
    if (a in post) {
      if (post[a]?.balance === undefined) continue;
      after = BigInt(post[a]!.balance!);
    } else {
      after = 0n;
    }
    if (after === before) continue;
    out.push({
      address: safeAddress(a),
      before_wei: before.toString(),
      after_wei: after.toString(),
      delta_wei: (after - before).toString(),
    });
  }
  const f = from.toLowerCase();
  return out.sort((x, y) => {
    const xf = x.address.toLowerCase() === f ? 0 : 1;
    const yf = y.address.toLowerCase() === f ? 0 : 1;
    return xf - yf || x.address.toLowerCase().localeCompare(y.address.toLowerCase());
  });
}

/** The most balance changes a preview lists. */
export const BALANCE_CHANGES_MAX = 100;

const absDelta = (c: BalanceChange): bigint => {
  try {
    const d = BigInt(c.delta_wei);
    return d < 0n ? -d : d;
  } catch {
    return 0n;
  }
};

/**
 * At most `max` balance changes: the sender's, then the largest |delta|; the kept ones in their
 * order (sender first, then by address), and how many were left out.
 */
export function capBalanceChanges(
  changes: BalanceChange[],
  from: string,
  max = BALANCE_CHANGES_MAX,
): { kept: BalanceChange[]; leftOut: number } {
  if (changes.length <= max) return { kept: changes, leftOut: 0 };
  const f = from.toLowerCase();
  const ranked = changes
    .map((c, i) => ({ c, i, sender: c.address.toLowerCase() === f, d: absDelta(c) }))
    .sort((x, y) =>
      x.sender !== y.sender ? (x.sender ? -1 : 1) : x.d === y.d ? x.i - y.i : x.d > y.d ? -1 : 1,
    );
  const keep = new Set(ranked.slice(0, max).map((r) => r.i));
  return { kept: changes.filter((_, i) => keep.has(i)), leftOut: changes.length - keep.size };
}

function lower<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k.toLowerCase(), v]));
}
