import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { SignIntentRequest, SignIntentResponse } from '@custos/proto/custos/signer/v1/sign';
import type { SignServiceServer } from '@custos/proto/custos/signer/v1/sign';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { SignService } from './sign-service.js';
import { budgetOf } from '../transactions/tx-grpc.js';
import type { SignIntentInput, SignIntentResult } from './sign-types.js';

/** Who may call SignService: the gateway, for agents' requests. */
export const signAccess: RpcAccess<SignServiceServer> = { default: ['gateway'] };

/** The wire request as the service's input (absent optional fields stay absent). */
export function signInputOf(req: SignIntentRequest): SignIntentInput {
  const input: SignIntentInput = { agentId: req.agentId, intentType: req.intentType, chain: req.chain };
  const optional = [
    'message',
    'typedDataJson',
    'hash',
    'txType',
    'to',
    'value',
    'data',
    'nonce',
    'gasLimit',
    'gasPrice',
    'maxFeePerGas',
    'maxPriorityFeePerGas',
    'destinationTag',
    'memo',
    'feeRateSatPerVbyte',
    'feeLimitSun',
    'tokenMint',
    'tokenDecimals',
    'ttl',
  ] as const;
  for (const k of optional) {
    const v = req[k];
    if (v !== undefined) (input as unknown as Record<string, unknown>)[k] = v;
  }
  if (req.approvalId) input.approvalId = req.approvalId;
  if (req.summary) input.summary = req.summary;
  if (req.canonicalBody) input.canonicalBody = req.canonicalBody;
  return input;
}

/** The result on the wire: empty strings for null text, absent for null numbers. */
export function signResponseOf(r: SignIntentResult): SignIntentResponse {
  return {
    approvalId: r.approvalId ?? '',
    intentType: r.intentType,
    chain: r.chain,
    from: r.from,
    signature: r.signature,
    signedTx: r.signedTx ?? '',
    txHash: r.txHash ?? '',
    messageHash: r.messageHash ?? '',
    typedDataHash: r.typedDataHash ?? '',
    ...(r.txType !== null ? { txType: r.txType } : {}),
    status: r.status ?? '',
    ...(r.nonce !== null ? { nonce: String(r.nonce) } : {}),
    transactionId: r.transactionId ?? '',
    fee: r.fee ?? '',
  };
}

/** gRPC adapter of SignService: verify the caller, decode, sign (within the call's deadline), encode. */
export function signGrpc(deps: { keys: IdentityKeys; sign: SignService }): AsyncService<SignServiceServer> {
  return {
    async signIntent(req, call) {
      const p = await currentCaller(deps.keys);
      return signResponseOf(await deps.sign.sign(p, signInputOf(req), budgetOf(call)));
    },
  };
}
