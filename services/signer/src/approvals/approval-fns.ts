import { createHash } from 'node:crypto';
import { Interface, dataLength, keccak256 } from 'ethers';
import type { RuleFacts } from '@custos/approval-rules';
import type { Summary } from '@custos/proto/custos/approvals/v1/messages';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import { canonicalJson } from '@custos/service-kit';
import type { ChainRecord } from '../chains/chain-types.js';
import { parseEvmValue } from '../evm/index.js';
import type { TransferInput } from '../keys/chain-adapter.js';
import { requestHash } from '../transactions/tx-fns.js';

/** The platform-created approval actions signer raises (design of issue 19). */
export const TX_ACTION = 'agent_transaction';
export const SIGN_ACTION = 'agent_sign_intent';

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
]);

/** `0x` + 8 lowercase hex of call data with at least 4 bytes; undefined otherwise (or not hex). */
export function selectorOf(data: string | undefined): string | undefined {
  if (!data || !/^0x[0-9a-fA-F]*$/.test(data) || data.length < 10) return undefined;
  return data.slice(0, 10).toLowerCase();
}

/**
 * The amount of an ERC-20 transfer/approve/transferFrom call, decoded as the chain does (with
 * ethers): the arguments' words, any bytes after them ignored as Solidity ignores them. `unknown`
 * when the selector is one of those but the arguments do not decode (too short, a malformed word):
 * the amount cannot be known, so `erc20_amount_above` must hold the call (fail closed). Undefined
 * for any other call.
 */
export function erc20AmountOf(data: string | undefined): bigint | 'unknown' | undefined {
  const selector = selectorOf(data);
  if (!selector || !data) return undefined;
  let fn;
  try {
    fn = ERC20.getFunction(selector);
  } catch {
    fn = null;
  }
  if (!fn) return undefined;
  try {
    if (dataLength(data) < 4 + 32 * fn.inputs.length) return 'unknown';
    const args = ERC20.decodeFunctionData(fn, data);
    return args.getValue('amount') as bigint;
  } catch {
    return 'unknown';
  }
}

/** The rule facts of an EVM transaction as signer parsed it. */
export function evmTxFacts(
  chain: Pick<ChainRecord, 'name' | 'chainId'>,
  t: { to: string | null; value: bigint; data: string },
  base: Pick<RuleFacts, 'action' | 'intentType'> = { action: TX_ACTION, intentType: 'transaction' },
): RuleFacts {
  const facts: RuleFacts = {
    ...base,
    chain: chain.name,
    chainId: chain.chainId.toString(),
    valueWei: t.value,
  };
  if (t.to) facts.to = t.to;
  const selector = selectorOf(t.data);
  if (selector) facts.selector = selector;
  const amount = erc20AmountOf(t.data);
  if (amount === 'unknown') facts.erc20AmountUnknown = true;
  else if (amount !== undefined) facts.erc20Amount = amount;
  return facts;
}

/**
 * The rule facts of a transfer on a non-EVM chain: the value in the chain's smallest unit for a
 * native transfer; a token transfer (token_mint) moves no native value, its amount (in the token's
 * base units, when its decimals are given) is `erc20Amount`.
 */
export function transferFacts(
  chain: Pick<ChainRecord, 'name' | 'nativeDecimals'>,
  t: TransferInput,
  base: Pick<RuleFacts, 'action' | 'intentType'> = { action: TX_ACTION, intentType: 'transaction' },
): RuleFacts {
  const facts: RuleFacts = { ...base, chain: chain.name, to: t.to };
  const amount = (decimals: number) => {
    try {
      return parseEvmValue(t.value, decimals, 'value');
    } catch {
      return undefined;
    }
  };
  if (t.tokenMint) {
    facts.valueWei = 0n;
    const a = tokenAmountOf(t);
    if (a !== undefined) facts.erc20Amount = a;
    // The amount cannot be known here (a decimal amount without decimals; the chain's token says
    // them at prepare): erc20_amount_above holds it.
    else facts.erc20AmountUnknown = true;
  } else {
    const v = amount(chain.nativeDecimals);
    if (v !== undefined) facts.valueWei = v;
  }
  return facts;
}

/**
 * A token transfer's amount in the token's base units: an integer `value` is base units; a decimal
 * one needs the token's decimals. Undefined when they are not known (or the value does not parse).
 */
export function tokenAmountOf(t: TransferInput): bigint | undefined {
  const v = t.value.trim();
  if (t.tokenDecimals === undefined && !/^[0-9]+$/.test(v)) return undefined;
  try {
    return parseEvmValue(v, t.tokenDecimals ?? 0, 'value');
  } catch {
    return undefined;
  }
}

/** What the approver's preview of a non-EVM transfer is computed from (a token moves no native value). */
export function transferHeld(
  from: string,
  t: TransferInput,
  facts: RuleFacts,
): { from: string; to: string; valueWei: bigint; data: string; token?: HeldToken } {
  if (!t.tokenMint) return { from, to: t.to, valueWei: facts.valueWei ?? 0n, data: '0x' };
  return {
    from,
    to: t.to,
    valueWei: 0n,
    data: '0x',
    token: { mint: t.tokenMint, amountRaw: facts.erc20Amount, decimals: t.tokenDecimals },
  };
}

interface HeldToken {
  mint: string;
  amountRaw?: bigint | undefined;
  decimals?: number | undefined;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The hash a resume's body must share with the held transaction's: as the Idempotency-Key's (the
 * canonical JSON of the body the gateway received, else of the request's fields), of the body
 * without `resume_tx_id`.
 */
export function approvalRequestHash(req: SubmitTransactionRequest): string {
  if (req.canonicalBody) {
    let body: unknown;
    try {
      body = JSON.parse(req.canonicalBody);
    } catch {
      body = undefined;
    }
    if (body && typeof body === 'object' && !Array.isArray(body)) {
      const { resume_tx_id: _resume, ...rest } = body as Record<string, unknown>;
      return sha256(canonicalJson(rest));
    }
    return sha256(req.canonicalBody);
  }
  const fields = requestHash({ ...req, resumeTxId: '', canonicalBody: '' });
  return sha256(canonicalJson({ fields, summary: req.summary ?? null }));
}

/** The target id of a sign intent's approval: SHA-256 hex of the canonical body without `approval_id`. */
export function signIntentTarget(canonicalBody: string): string {
  return sha256(canonicalBody);
}

/** The agent's summary, or a title signer makes from the request when the agent gave none. */
export function summaryOr(s: Summary | undefined, title: string): Summary {
  if (s && s.title) return { title: s.title, body: s.body ?? '', fields: s.fields ?? [] };
  return { title, body: s?.body ?? '', fields: s?.fields ?? [] };
}

/** The largest call data (hex characters) an approval's payload carries as is (approvals keeps 64 KiB). */
export const PAYLOAD_DATA_MAX = 32 * 1024;

/**
 * The payload of a transaction's approval: `{chain, to, value, data}` as the agent sent them. Longer
 * call data is left out (`data_truncated`), its size and keccak-256 named instead; the preview
 * decodes it for the approver either way.
 */
export function approvalPayload(
  chain: string,
  to: string,
  value: string,
  data: string,
): Record<string, unknown> {
  const payload: Record<string, unknown> = { chain, to, value };
  if (data.length <= PAYLOAD_DATA_MAX) payload['data'] = data;
  else {
    payload['data_truncated'] = true;
    if (/^0x([0-9a-fA-F]{2})*$/.test(data)) {
      payload['data_bytes'] = (data.length - 2) / 2;
      payload['data_keccak256'] = keccak256(data);
    }
  }
  return payload;
}
