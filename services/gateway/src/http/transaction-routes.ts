import { Router } from 'express';
import { z } from 'zod/v4';
import type { Transaction } from '@custos/proto/custos/signer/v1/transactions';
import { TransactionServiceClient } from '@custos/proto/custos/signer/v1/transactions';
import { canonicalJson, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { AgentParams } from './agent-schemas.js';
import { SummarySchema, summaryMessage } from './approval-schemas.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, chainAmount, dateTime, idParam, intQuery, must, queryString, safeCount } from './schemas.js';

/** A transaction as HTTP shows it: the reference TransactionResponse and more. */
export const TransactionResponse = z.object({
  id: z.string(),
  agent_id: z.string(),
  chain: z.string().describe('The chain registry name'),
  chain_id: z.number().int(),
  from: z
    .string()
    .describe("The agent key's address on the chain's network (EVM: EIP-55; Bitcoin bc1/tb1/bcrt1 …)"),
  to: z.string().nullable(),
  value_wei: z
    .string()
    .describe(
      "Decimal base units: wei (EVM), satoshi, lamport, drop, sun, lovelace, or the token's base unit",
    ),
  data: z.string().nullable().describe('EVM: 0x calldata (`0x` when none); null for other families'),
  nonce: z
    .number()
    .int()
    .nullable()
    .describe(
      'Allocated by the service (EVM nonce; XRP account Sequence); null when none was (simulation_failed, other families)',
    ),
  gas_limit: z.string().nullable(),
  tx_type: z.number().int().nullable().describe('EVM: 2 (EIP-1559) or 0 (legacy); null for other families'),
  max_fee_per_gas: z.string().nullable().describe('Wei (type 2)'),
  max_priority_fee_per_gas: z.string().nullable().describe('Wei (type 2)'),
  gas_price: z.string().nullable().describe('Wei (type 0)'),
  status: z
    .enum([
      'awaiting_approval',
      'pending',
      'signed',
      'sign_only',
      'broadcast',
      'confirmed',
      'failed',
      'simulation_failed',
    ])
    .describe(
      '`confirmed`/`failed` follow the receipt; `awaiting_approval`: held for a human (nothing signed), resumed with `resume_tx_id`',
    ),
  tx_hash: z.string().nullable(),
  signed_tx: z
    .string()
    .nullable()
    .optional()
    .describe('Raw signed transaction; always on the POST, on GETs only with include_signed_tx=true'),
  error_message: z.string().nullable(),
  block_number: z.number().int().nullable(),
  gas_used: z.string().nullable(),
  created_at: dateTime,
  signed_at: dateTime.nullable(),
  broadcast_at: dateTime.nullable(),
  confirmed_at: dateTime.nullable(),
  family: z
    .enum(['evm', 'bitcoin', 'solana', 'xrp', 'tron', 'cardano'])
    .describe("The chain's family: the gas fields, data and tx_type are EVM's; fee and details the others'"),
  fee: z
    .string()
    .nullable()
    .describe(
      'Non-EVM: the most it pays in fees, then what the chain charged, in the native base unit (satoshi, lamport, drop, sun, lovelace)',
    ),
  details: z
    .record(z.string(), z.string())
    .describe('Non-EVM: memo, destination_tag, token_mint, fee rate, inputs … (empty for EVM)'),
  approval_id: z
    .string()
    .nullable()
    .describe(
      'The approval the transaction waits for (`awaiting_approval`) or was resumed with; null when none',
    ),
});

type TransactionJson = z.infer<typeof TransactionResponse>;

function txBody(t: Transaction, withSignedTx: boolean): TransactionJson {
  const body: TransactionJson = {
    id: t.id,
    agent_id: t.agentId,
    chain: t.chain,
    chain_id: Number(t.chainId),
    from: t.from,
    to: t.to || null,
    value_wei: t.valueWei,
    data: t.data,
    nonce: t.hasNonce ? Number(t.nonce) : null,
    gas_limit: t.gasLimit || null,
    tx_type: t.txType,
    max_fee_per_gas: t.maxFeePerGas || null,
    max_priority_fee_per_gas: t.maxPriorityFeePerGas || null,
    gas_price: t.gasPrice || null,
    status: t.status as TransactionJson['status'],
    tx_hash: t.txHash || null,
    error_message: t.errorMessage || null,
    block_number: t.hasBlockNumber ? Number(t.blockNumber) : null,
    gas_used: t.gasUsed || null,
    created_at: t.createdAt,
    signed_at: t.signedAt || null,
    broadcast_at: t.broadcastAt || null,
    confirmed_at: t.confirmedAt || null,
    family: (t.family || 'evm') as TransactionJson['family'],
    fee: t.fee || null,
    details: t.details,
    approval_id: t.approvalId || null,
  };
  if (body.family !== 'evm') {
    body.data = null;
    body.tx_type = null;
  }
  if (withSignedTx) body.signed_tx = t.signedTx || null;
  return body;
}

/**
 * A JSON number is only taken when it is exact: a whole, non-negative safe integer (at most
 * 2^53 - 1). A larger one was already rounded by JSON parsing (123456789012345678 arrives as
 * ...680), so it is refused (400 naming the field): give such amounts as decimal strings.
 */

/** When the gateway gives up on signer for a submission or a sign intent (see docs/decisions.md). */
export const SIGNER_CHAIN_DEADLINE_MS = 60_000;

/** Fields of the reference request that this path does not honour: named in a 400 by signer. */
const UNSUPPORTED = [
  'nonce',
  'signing_key_path',
  'approval_id',
  'xrpl_tx_json',
  'raw_transaction',
  'tron_transaction',
] as const;

/**
 * The reference request's non-EVM transfer fields (docs/chains.md): shapes here, meanings in
 * signer's chain adapters (each refuses, naming it, a field its chain does not take; EVM refuses all).
 */
export const TRANSFER_FIELDS = {
  destination_tag: safeCount.optional().describe('XRP: destination tag (0 to 4294967295)'),
  memo: z.string().max(1000).optional().describe('XRP, Solana, Tron: a memo (UTF-8 text)'),
  fee_rate_sat_per_vbyte: safeCount
    .optional()
    .describe("Bitcoin: fee rate in sat/vB (default: the node's 6-block estimate)"),
  fee_limit_sun: safeCount.optional().describe('Tron TRC-20: energy fee limit in sun'),
  token_mint: z
    .string()
    .max(200)
    .optional()
    .describe('Solana SPL mint or Tron TRC-20 contract; absent: the native coin'),
  token_decimals: z
    .number()
    .int()
    .min(0)
    .max(30)
    .optional()
    .describe("Solana, Tron: the token's decimals (default 6)"),
  ttl: safeCount.optional().describe('Cardano: time-to-live, an absolute slot (default: tip + 7200)'),
};

/** The transfer fields of a body as the proto requests carry them (absent stay absent). */
export function transferFieldsOf(body: {
  destination_tag?: number | undefined;
  memo?: string | undefined;
  fee_rate_sat_per_vbyte?: number | undefined;
  fee_limit_sun?: number | undefined;
  token_mint?: string | undefined;
  token_decimals?: number | undefined;
  ttl?: number | undefined;
}) {
  return {
    ...(body.destination_tag !== undefined ? { destinationTag: String(body.destination_tag) } : {}),
    ...(body.memo !== undefined ? { memo: body.memo } : {}),
    ...(body.fee_rate_sat_per_vbyte !== undefined
      ? { feeRateSatPerVbyte: String(body.fee_rate_sat_per_vbyte) }
      : {}),
    ...(body.fee_limit_sun !== undefined ? { feeLimitSun: String(body.fee_limit_sun) } : {}),
    ...(body.token_mint !== undefined ? { tokenMint: body.token_mint } : {}),
    ...(body.token_decimals !== undefined ? { tokenDecimals: body.token_decimals } : {}),
    ...(body.ttl !== undefined ? { ttl: String(body.ttl) } : {}),
  };
}

const SubmitBody = bodyOf({
  chain: z
    .union([z.string().min(1, 'is required').max(100), z.number().int().min(0)])
    .transform(String)
    .optional()
    .describe('Chain name (`anvil`, `base` …), numeric chain id or registry UUID (this or chain_id)'),
  chain_id: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Numeric chain id; must agree with `chain` when both are given'),
  to: z
    .string()
    .max(200)
    .describe("The recipient: a 0x address on EVM (EIP-55 or all lower-case), else the chain's own form"),
  value: chainAmount.describe(
    'The base unit (wei, satoshi, lamport, drop, sun, lovelace; a token\'s with token_mint) as a decimal integer string (EVM also 0x hex); a decimal with a fractional part ("0.01") is the coin (ETH, BTC …) or whole tokens; a JSON number is the base unit and must be a safe integer',
  ),
  data: z.string().max(262144).optional().describe('0x calldata, even length'),
  gas_limit: chainAmount
    .optional()
    .describe('Gas limit (estimated when absent; at most the agent max_gas_limit)'),
  max_fee_per_gas: chainAmount
    .optional()
    .describe('Wei (from the chain when absent, capped by max_fee_per_gas_gwei)'),
  max_priority_fee_per_gas: chainAmount.optional().describe('Wei'),
  gas_price: chainAmount.optional().describe('Wei, legacy (tx_type 0) only'),
  tx_type: z.number().int().optional().describe('2 (EIP-1559, default) or 0 (legacy)'),
  simulate_first: z.boolean().optional().describe('eth_call first; a revert ends simulation_failed (422)'),
  mode: z.enum(['eoa', 'smart_account']).optional().describe('Only `eoa`'),
  gasless: z.boolean().optional().describe('Only false'),
  resume_tx_id: z
    .string()
    .max(100)
    .optional()
    .describe(
      'Resume a transaction awaiting approval: its id, with the same body; its approval must be approved (consensus: executed) and unused, else 403 `approval_required`',
    ),
  summary: SummarySchema.optional().describe(
    "The agent's own words for the approver, shown beside the server's preview (which flags where they disagree)",
  ),
  nonce: z.number().int().optional().describe('Refused: nonces are allocated by the service'),
  signing_key_path: z
    .string()
    .max(500)
    .optional()
    .describe("Refused: the agent's own key for the chain signs"),
  approval_id: z
    .string()
    .max(100)
    .optional()
    .describe('Refused: a held transaction is resumed with `resume_tx_id`'),
  ...TRANSFER_FIELDS,
  xrpl_tx_json: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('Not supported yet: refused, 400 naming it'),
  raw_transaction: z.string().max(262144).optional().describe('Not supported yet: refused, 400 naming it'),
  tron_transaction: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('Not supported yet: refused, 400 naming it'),
});

const includeSignedTx = queryString
  .optional()
  .transform((v) => v === 'true' || v === '1')
  .describe('`true` or `1` includes signed_tx (absent otherwise)');

const tag = 'transactions';

/**
 * Agents' transactions on EVM chains (issue 17). Signer decides who may: only the agent itself,
 * with the Intents API enabled, submits; the agent and humans of its org read.
 */
export function transactionRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const signer = peers.client(TransactionServiceClient, 'signer');
  const call = unaryCaller(signer);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/transactions',
      access: 'authenticated',
      summary:
        "Build, sign with the agent's key and broadcast a transaction (the agent itself, with the Intents API enabled)",
      tag,
      params: AgentParams,
      body: SubmitBody,
      headers: {
        'Idempotency-Key':
          'Optional: a repeat within 24 h with the same body returns the stored transaction (200); another body 422; while the first runs 409',
      },
      responses: {
        201: {
          description:
            'Signed and broadcast; `failed` when the node refused it (nonce given back); `signed` when the broadcast got no definite answer (the node may have it: signer sends the same bytes again later)',
          schema: TransactionResponse,
        },
        202: {
          description:
            "A rule of the agent's action_approval_policy matched: `awaiting_approval` with `approval_id`, nothing signed and no nonce taken; resume with the same body and `resume_tx_id` once a human approved",
          schema: TransactionResponse,
        },
        200: {
          description: 'The transaction made earlier with the same Idempotency-Key',
          schema: TransactionResponse,
        },
        422: {
          description: 'simulate_first: the call reverts (status simulation_failed)',
          schema: TransactionResponse,
        },
      },
    },
    async (req, res, { params, body }) => {
      const unsupported = UNSUPPORTED.filter((f) => body[f] !== undefined);
      if (body.mode === 'smart_account') unsupported.push('mode' as never);
      if (body.gasless === true) unsupported.push('gasless' as never);
      const r = await call(
        signer.submitTransaction,
        {
          agentId: params.agent_id,
          chain: body.chain ?? '',
          chainId: body.chain_id !== undefined ? String(body.chain_id) : undefined,
          to: body.to,
          value: body.value,
          data: body.data ?? '',
          gasLimit: body.gas_limit,
          maxFeePerGas: body.max_fee_per_gas,
          maxPriorityFeePerGas: body.max_priority_fee_per_gas,
          gasPrice: body.gas_price,
          txType: body.tx_type,
          simulateFirst: body.simulate_first ?? false,
          idempotencyKey: req.header('Idempotency-Key') ?? '',
          resumeTxId: body.resume_tx_id ?? '',
          unsupportedFields: unsupported,
          canonicalBody: canonicalJson(req.body),
          ...transferFieldsOf(body),
          ...(body.summary !== undefined ? { summary: summaryMessage(body.summary) } : {}),
        },
        // Signer's worst case makes several chain calls (EVM_RPC_TIMEOUT_MS each): the default
        // peer deadline would answer 503 while signer goes on to sign and broadcast.
        { deadline: Date.now() + SIGNER_CHAIN_DEADLINE_MS },
      );
      const t = must(r.transaction, 'transaction');
      const status = r.replayed
        ? 200
        : t.status === 'awaiting_approval'
          ? 202
          : t.status === 'simulation_failed'
            ? 422
            : 201;
      res.status(status).json(txBody(t, true));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents/:agent_id/transactions',
      access: 'authenticated',
      summary: "The agent's transactions, newest first (the agent itself; humans of its org)",
      tag,
      params: AgentParams,
      query: z.object({
        include_signed_tx: includeSignedTx,
        limit: intQuery(1, 100, 'Page size (default 50)').optional(),
        cursor: queryString.max(200).optional().describe('next_cursor of the previous page'),
      }),
      responses: {
        200: {
          description: 'One page; next_cursor is null on the last',
          schema: z.object({
            transactions: z.array(TransactionResponse),
            next_cursor: z.string().nullable(),
          }),
        },
      },
    },
    async (_req, res, { params, query }) => {
      const r = await call(signer.listTransactions, {
        agentId: params.agent_id,
        limit: query.limit ?? 0,
        cursor: query.cursor ?? '',
        includeSignedTx: query.include_signed_tx,
      });
      res.json({
        transactions: r.transactions.map((t) => txBody(t, query.include_signed_tx)),
        next_cursor: r.nextCursor || null,
      });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents/:agent_id/transactions/:tx_id',
      access: 'authenticated',
      summary: 'One transaction of the agent (the agent itself; humans of its org)',
      tag,
      params: z.object({ agent_id: idParam, tx_id: idParam }),
      query: z.object({ include_signed_tx: includeSignedTx }),
      responses: { 200: { description: 'The transaction', schema: TransactionResponse } },
    },
    async (_req, res, { params, query }) => {
      const r = await call(signer.getTransaction, {
        agentId: params.agent_id,
        txId: params.tx_id,
        includeSignedTx: query.include_signed_tx,
      });
      res.json(txBody(must(r.transaction, 'transaction'), query.include_signed_tx));
    },
  );

  return router;
}
