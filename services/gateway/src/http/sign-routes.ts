import { Router } from 'express';
import { z } from 'zod/v4';
import type { SignIntentResponse as SignReply } from '@custos/proto/custos/signer/v1/sign';
import { SignServiceClient } from '@custos/proto/custos/signer/v1/sign';
import { canonicalJson, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { AgentParams } from './agent-schemas.js';
import { SummarySchema, summaryMessage } from './approval-schemas.js';
import { type Guards, declareRoute } from './routes.js';
import { SIGNER_CHAIN_DEADLINE_MS, TRANSFER_FIELDS, transferFieldsOf } from './transaction-routes.js';
import { bodyOf, chainAmount, safeCount } from './schemas.js';

/** The reference SignIntentResponse, with `status`, `nonce` and `transaction_id` for a transaction. */
export const SignIntentResponse = z.object({
  intent_type: z.enum(['personal_sign', 'typed_data', 'eip712_digest', 'transaction']),
  chain: z.string().describe('The chain registry name'),
  from: z
    .string()
    .describe("The agent key's address on the chain's network (EVM: EIP-55; Bitcoin bc1/tb1/bcrt1 …)"),
  signature: z
    .string()
    .nullable()
    .describe('EVM: 65-byte signature, 0x hex (r, s, v); null for other families (see signed_tx)'),
  signed_tx: z.string().nullable().describe('transaction: the signed serialized transaction (not broadcast)'),
  tx_hash: z.string().nullable().describe('transaction: its hash'),
  message_hash: z.string().nullable().describe('personal_sign: the EIP-191 hash signed'),
  typed_data_hash: z
    .string()
    .nullable()
    .describe('typed_data: the EIP-712 hash signed; eip712_digest: the digest signed'),
  tx_type: z.number().int().nullable().describe('transaction: 2 (EIP-1559) or 0 (legacy)'),
  status: z
    .enum(['sign_only'])
    .nullable()
    .describe('transaction: `sign_only` (signer does not broadcast it)'),
  nonce: z.number().int().nullable().describe('transaction: the nonce signed (XRP: the Sequence)'),
  transaction_id: z
    .string()
    .nullable()
    .describe("transaction: its `sign_only` record among the agent's transactions"),
  fee: z
    .string()
    .nullable()
    .describe('transaction on a non-EVM chain: the most it pays in fees, in the native base unit'),
});

type SignJson = z.infer<typeof SignIntentResponse>;

function signBody(r: SignReply): SignJson {
  return {
    intent_type: r.intentType as SignJson['intent_type'],
    chain: r.chain,
    from: r.from,
    signature: r.signature || null,
    signed_tx: r.signedTx || null,
    tx_hash: r.txHash || null,
    message_hash: r.messageHash || null,
    typed_data_hash: r.typedDataHash || null,
    tx_type: r.txType ?? null,
    status: r.status === 'sign_only' ? 'sign_only' : null,
    nonce: r.nonce !== undefined ? Number(r.nonce) : null,
    transaction_id: r.transactionId || null,
    fee: r.fee || null,
  };
}

/** The largest EIP-712 document taken, as JSON text (signer refuses a larger one too). */
const TYPED_DATA_MAX_CHARS = 65_536;

// Only the shape is checked here; signer checks the content (hex, addresses, types, EIP-712) inside
// the Intents API's audit, so that each refusal of a field's content is recorded `agent.sign.refused`.
const SignBody = bodyOf({
  intent_type: z
    .string()
    .max(100)
    .describe('`personal_sign`, `typed_data`, `eip712_digest` (needs raw_signing_enabled) or `transaction`'),
  chain: z
    .union([z.string().min(1, 'is required').max(100), z.number().int().min(0)])
    .transform(String)
    .describe('Chain name (`anvil`, `base` …), numeric chain id or registry UUID'),
  message: z
    .string()
    .max(262144)
    .optional()
    .describe('personal_sign: the message bytes, 0x hex (needs message_signing_enabled)'),
  typed_data: z
    .unknown()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return undefined;
      // Sent on as JSON text: a document nested too deeply to serialize, or larger than 64 KiB, is 400.
      let text: string | undefined;
      try {
        text = JSON.stringify(v);
      } catch {
        text = undefined;
      }
      if (text === undefined || text.length > TYPED_DATA_MAX_CHARS) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a JSON object of at most ${TYPED_DATA_MAX_CHARS} characters`,
        });
        return z.NEVER;
      }
      return text;
    })
    .describe(
      'typed_data: the EIP-712 object {types, primaryType, domain, message}; domain.chainId must be the chain',
    ),
  hash: z
    .string()
    .max(100)
    .optional()
    .describe('eip712_digest: the 32-byte digest, 0x hex (signed as given)'),
  tx_type: z
    .number()
    .int()
    .min(0)
    .max(255)
    .optional()
    .describe('transaction: 2 (EIP-1559, default) or 0 (legacy)'),
  to: z
    .string()
    .max(200)
    .optional()
    .describe("transaction: the recipient (EVM: 0x, EIP-55 or all lower-case; else the chain's own form)"),
  value: z
    .string()
    .max(100)
    .optional()
    .describe(
      'transaction: the base unit as a decimal integer (EVM: wei, also 0x hex); a decimal with a fraction ("0.01") is the coin or whole tokens',
    ),
  data: z.string().max(262144).optional().describe('transaction: 0x calldata, even length'),
  nonce: safeCount
    .optional()
    .describe("transaction: the nonce (default: the chain's pending nonce of the key's address)"),
  gas_limit: chainAmount
    .optional()
    .describe('transaction: gas limit (estimated when absent; at most max_gas_limit)'),
  gas_price: chainAmount.optional().describe('transaction (type 0): wei (from the chain when absent)'),
  max_fee_per_gas: chainAmount
    .optional()
    .describe('transaction (type 2): wei (from the chain when absent, capped by max_fee_per_gas_gwei)'),
  max_priority_fee_per_gas: chainAmount.optional().describe('transaction (type 2): wei'),
  ...TRANSFER_FIELDS,
  approval_id: z
    .string()
    .min(1, 'is required')
    .max(100)
    .optional()
    .describe(
      'Resume an intent held for approval: the same body plus the approval granted for it (used once); otherwise 403 `approval_required`',
    ),
  summary: SummarySchema.optional().describe("The agent's own words for the approver"),
});

/** A sign intent held for a human (202): nothing was signed. */
export const SignAwaitingApprovalResponse = z.object({
  status: z.literal('awaiting_approval'),
  approval_id: z.string().describe('The approval a human must grant; resume with the same body and it'),
  intent_type: z.string(),
  chain: z.string(),
  from: z.string(),
});

/**
 * The text an approval of a sign intent is bound to: the body's canonical JSON without
 * `approval_id` (so the resume, the same body plus the approval, names the same intent).
 */
export function signCanonicalBody(raw: unknown): string {
  const { approval_id: _omit, ...rest } = (raw ?? {}) as Record<string, unknown>;
  return canonicalJson(rest);
}

/**
 * Sign intents of agents (spec §4.4, reference `signIntent`). Signer decides who may: only the
 * agent itself, with the Intents API enabled, on its own server-custody key.
 */
export function signRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const signer = peers.client(SignServiceClient, 'signer');
  const call = unaryCaller(signer);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/sign',
      access: 'authenticated',
      summary:
        "Sign an intent with the agent's key: EIP-191 message, EIP-712 typed data, a raw digest, or a transaction that is not broadcast (the agent itself, with the Intents API enabled)",
      tag: 'signing',
      params: AgentParams,
      body: SignBody,
      responses: {
        200: { description: 'The signature', schema: SignIntentResponse },
        202: {
          description:
            "A rule of the agent's action_approval_policy matched (action `agent_sign_intent`): nothing signed; once a human approved, send the same body with `approval_id`",
          schema: SignAwaitingApprovalResponse,
        },
      },
    },
    async (req, res, { params, body }) => {
      const r = await call(
        signer.signIntent,
        {
          agentId: params.agent_id,
          intentType: body.intent_type,
          chain: body.chain,
          ...(body.message !== undefined ? { message: body.message } : {}),
          ...(body.typed_data !== undefined ? { typedDataJson: body.typed_data } : {}),
          ...(body.hash !== undefined ? { hash: body.hash } : {}),
          ...(body.tx_type !== undefined ? { txType: body.tx_type } : {}),
          ...(body.to !== undefined ? { to: body.to } : {}),
          ...(body.value !== undefined ? { value: body.value } : {}),
          ...(body.data !== undefined ? { data: body.data } : {}),
          ...(body.nonce !== undefined ? { nonce: String(body.nonce) } : {}),
          ...(body.gas_limit !== undefined ? { gasLimit: body.gas_limit } : {}),
          ...(body.gas_price !== undefined ? { gasPrice: body.gas_price } : {}),
          ...(body.max_fee_per_gas !== undefined ? { maxFeePerGas: body.max_fee_per_gas } : {}),
          ...(body.max_priority_fee_per_gas !== undefined
            ? { maxPriorityFeePerGas: body.max_priority_fee_per_gas }
            : {}),
          ...transferFieldsOf(body),
          approvalId: body.approval_id ?? '',
          ...(body.summary !== undefined ? { summary: summaryMessage(body.summary) } : {}),
          canonicalBody: signCanonicalBody(req.body),
        },
        // A transaction intent may ask the chain (EVM_RPC_TIMEOUT_MS per call): longer than the
        // default peer deadline, so the caller is not told 503 while signer goes on to sign.
        { deadline: Date.now() + SIGNER_CHAIN_DEADLINE_MS },
      );
      if (r.status === 'awaiting_approval') {
        res.status(202).json({
          status: 'awaiting_approval',
          approval_id: r.approvalId,
          intent_type: r.intentType,
          chain: r.chain,
          from: r.from,
        });
        return;
      }
      res.json(signBody(r));
    },
  );

  return router;
}
