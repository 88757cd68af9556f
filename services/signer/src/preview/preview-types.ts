import type { EvmCall, EvmCallResult } from '../evm/evm-rpc.js';

/** What the preview is computed from: the held transaction as signer parsed it, never the agent's words. */
export interface PreviewInput {
  chain: {
    name: string;
    chainId: bigint | number | string;
    family: string;
    nativeSymbol?: string;
    /** Decimals of the native unit (18 when absent). */
    decimals?: number;
  };
  from: string;
  to: string;
  /** Value in the chain's smallest unit (wei, satoshi, lamport …). */
  valueWei: bigint;
  /** Call data, `0x` when none. */
  data: string;
  /**
   * A non-EVM token transfer (SPL, TRC-20, ...): the token (mint / contract), its amount in base
   * units when known and its decimals when given. The native `valueWei` of such a transfer is 0.
   */
  token?: { mint: string; amountRaw?: bigint | undefined; decimals?: number | undefined };
  /** The agent's own summary, shown as given and checked against the payload. */
  summary?: PreviewSummary;
  /** The rule that asked for approval (shown as is). */
  rule?: Record<string, unknown>;
  tier: number;
}

/** The agent's summary of what it asks for. */
export interface PreviewSummary {
  title: string;
  body: string;
  fields: { label: string; value: string }[];
}

/** What the token ABIs' calls do, as the preview names it. */
export type CallKind =
  | 'erc20_transfer'
  | 'erc20_transfer_from'
  | 'erc20_approve'
  | 'erc20_increase_allowance'
  | 'erc721_transfer'
  | 'erc721_approve'
  | 'set_approval_for_all'
  | 'erc1155_transfer'
  | 'weth_deposit'
  | 'weth_withdraw';

/** A decoded call: selector, and for a known ABI its name, signature and arguments. */
export interface DecodedCall {
  /** `0x` + 8 hex, lowercased (the whole data when shorter than 4 bytes; null when not hex). */
  selector: string | null;
  /** The function's name; null when no known ABI has the selector. */
  name: string | null;
  /** `name(type,…)`; null when unknown. */
  signature: string | null;
  /** Arguments by name (`arg<i>` when unnamed) as text: addresses checksummed, numbers decimal. */
  args: Record<string, string>;
  /** What a known token call does. */
  kind?: CallKind;
  /** The decoded values (bigint, string, boolean …) by the same names, for the flags. */
  values?: Record<string, unknown>;
  /** Set when the selector is known but its arguments do not decode. */
  decodeError?: string;
}

/** debug_traceCall's prestateTracer answer in diffMode: accounts' state before and after (changed fields). */
export interface PrestateDiff {
  pre: Record<string, { balance?: string; nonce?: number; code?: string } | undefined>;
  post: Record<string, { balance?: string; nonce?: number; code?: string } | undefined>;
}

/**
 * The chain access the preview needs. Any signer `EvmRpc` has `call`; `traceCall` is optional
 * (JsonRpcPreview has both). traceCall throws TraceUnsupportedError when the node lacks the method.
 */
export interface PreviewRpc {
  /** eth_call at `latest`: success with return data, or a revert with its data and reason. */
  call(c: EvmCall): Promise<EvmCallResult>;
  /** debug_traceCall at `latest` with the prestateTracer in diffMode. */
  traceCall?(c: EvmCall): Promise<PrestateDiff>;
}

/** The node does not offer debug_traceCall (or its prestateTracer): balance changes are unknown. */
export class TraceUnsupportedError extends Error {
  constructor(message = 'debug_traceCall is not supported by this node') {
    super(message);
    this.name = 'TraceUnsupportedError';
  }
}

/** One preview flag: a stable code and a sentence for the approver. */
export interface PreviewFlag {
  code:
    | 'unlimited_approval'
    | 'summary_recipient_mismatch'
    | 'summary_amount_mismatch'
    | 'simulation_reverted'
    | 'value_and_call';
  detail: string;
}

/** The token movement or permission a decoded call gives, in the preview's JSON shape. */
export interface TokenTransferJson {
  token: string;
  recipient: string;
  amount_raw: string | null;
  kind: CallKind;
  /** The owner the tokens leave (transferFrom / safeTransferFrom). */
  owner?: string;
  token_id?: string;
  /** setApprovalForAll's flag. */
  approved?: boolean;
  /** The token's decimals() when the contract answered it. */
  decimals?: number;
  /** amount_raw in the token's major units when decimals are known. */
  amount?: string;
}

/** A non-EVM token transfer in the preview's JSON shape. */
export interface ChainTokenTransferJson {
  token: string;
  recipient: string;
  /** Base units; null when they cannot be known before the chain is asked (no decimals given). */
  amount_raw: string | null;
  decimals?: number;
  /** amount_raw in the token's major units when decimals are known. */
  amount?: string;
}

export type { EvmCall, EvmCallResult };
