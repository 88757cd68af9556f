import type { Summary } from '@custos/proto/custos/approvals/v1/messages';
import { NO_BUDGET, type SubmitBudget } from '../transactions/tx-service.js';

/** The intent types of `POST /v1/agents/{id}/sign` on an EVM chain (reference SignIntentRequest). */
export const INTENT_TYPES = ['personal_sign', 'typed_data', 'eip712_digest', 'transaction'] as const;

/** One intent type. */
export type IntentType = (typeof INTENT_TYPES)[number];

/** A sign request as the gRPC adapter decodes it: text fields unchecked, absent when not sent. */
export interface SignIntentInput {
  agentId: string;
  intentType: string;
  chain: string;
  message?: string;
  /** The EIP-712 document as JSON text. */
  typedDataJson?: string;
  hash?: string;
  txType?: number;
  to?: string;
  value?: string;
  data?: string;
  /** Decimal text (int64 on the wire). */
  nonce?: string;
  gasLimit?: string;
  gasPrice?: string;
  maxFeePerGas?: string;
  maxPriorityFeePerGas?: string;
  /** transaction, non-EVM chains: the transfer fields (int64 as decimal text on the wire). */
  destinationTag?: string;
  memo?: string;
  feeRateSatPerVbyte?: string;
  feeLimitSun?: string;
  tokenMint?: string;
  tokenDecimals?: number;
  ttl?: string;
  /** A resume: the approval the agent got for this same request (issue 19). */
  approvalId?: string;
  /** The agent's own words for the approver. */
  summary?: Summary;
  /** The canonical JSON of the body without `approval_id`, as the gateway received it. */
  canonicalBody?: string;
}

/** What a signed intent answers (reference SignIntentResponse); null where the intent has none. */
export interface SignIntentResult {
  intentType: IntentType;
  chain: string;
  from: string;
  signature: string;
  signedTx: string | null;
  txHash: string | null;
  messageHash: string | null;
  typedDataHash: string | null;
  txType: number | null;
  /** `sign_only` for a transaction; `awaiting_approval` when a rule sends it to humans; null otherwise. */
  status: 'sign_only' | 'awaiting_approval' | null;
  nonce: number | null;
  /** transaction: the id of its `sign_only` record; null otherwise. */
  transactionId: string | null;
  /** transaction on a non-EVM chain: the most it pays in fees (native base unit); null otherwise. */
  fee?: string | null;
  /** The approval asked for (awaiting_approval) or used (a resume); absent otherwise. */
  approvalId?: string | null;
}

/**
 * How long the caller still waits for a sign request: the Transactions API's budget (the gRPC
 * call's deadline, which the gateway sets per route, and its cancellation). Signer checks it before
 * signing and before recording, so that it never records a signature (or a sign-only transaction and
 * its event) its caller was already told 503 about.
 */
export type SignBudget = SubmitBudget;

/** No deadline, never cancelled. */
export const NO_SIGN_BUDGET: SignBudget = NO_BUDGET;

/**
 * The least time left before the caller's deadline for a signature to be recorded (one database
 * commit): with less, the signature is dropped and the answer is 503 (nothing recorded).
 */
export const RECORD_MARGIN_MS = 1_000;
