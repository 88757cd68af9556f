import { randomUUID } from 'node:crypto';
import { auditOf } from '@custos/events';
import type { Logger } from '@custos/service-kit';
import { failClosed } from '../audit/signer-audit.js';
import type { IntentScope } from '../intents/intent-context.js';
import { type TransferInput, addressOn } from '../keys/chain-adapter.js';
import type { KeyLoader } from '../keys/key-loader.js';
import { PREPARE, endpointOf, onChain, signChecked, transfersOf } from '../transactions/transfer-flow.js';
import { refuseEvmFields, transferDetails, transferInputOf } from '../transactions/tx-fns.js';
import type { TxStore } from '../transactions/tx-store.js';
import type { SignStore } from './sign-store.js';
import { RECORD_MARGIN_MS, type SignIntentInput, type SignIntentResult } from './sign-types.js';

/**
 * A sign-only transfer on a non-EVM chain: prepared from the chain's state as a submission is
 * (the adapter reads balances, UTXOs, fees, blockhash or sequence), signed, stored `sign_only`
 * with its record and `agent.transaction.signed`, never broadcast. It holds nothing: its inputs
 * are not reserved and a sequence is the chain's next or the Transactions API's next when that is
 * ahead (read only), so a sign-only transfer and a later submission may spend the same outputs.
 */
export async function signTransferOnly(
  deps: {
    store: Pick<SignStore, 'nextNonce' | 'recordSignOnly'>;
    inputs: Pick<TxStore, 'inputsInUse'>;
    loader: Pick<KeyLoader, 'withKey'>;
    logger: Logger;
    rpcTimeoutMs: number;
  },
  scope: IntentScope,
  input: SignIntentInput,
  o: {
    /** Refuses to go on (503) when fewer than `marginMs` are left of the caller's time. */
    inTime: (marginMs: number, step: string) => void;
    /** What every signature's record names (chain, key, address). */
    auditDetails: Record<string, unknown>;
    /**
     * The approval step (issue 19), just before the key is used, with the transfer as the chain's
     * adapter parsed it: the approval used, if any.
     */
    beforeSign?: (t: TransferInput) => Promise<string | undefined>;
  },
): Promise<SignIntentResult> {
  refuseEvmFields(input, scope.chain.family);
  const ops = transfersOf(scope.adapter, scope.chain);
  const t = ops.parse(transferInputOf(input), scope.chain);
  const ep = endpointOf(scope.chain, deps.rpcTimeoutMs);
  const from = addressOn(scope.adapter, scope.key, scope.chain);
  const keyView = { address: scope.key.address, publicKey: scope.key.publicKey };
  const prepared = await onChain(deps.logger, scope.chain, PREPARE, () =>
    ops.prepare(
      {
        endpoint: ep,
        key: keyView,
        from,
        inputsInUse: () => deps.inputs.inputsInUse(scope.key.id, scope.chain.name),
      },
      t,
    ),
  );
  let sequence: bigint | undefined;
  if (prepared.sequenceFromChain !== undefined) {
    const stored = await deps.store.nextNonce(scope.key.id, scope.chain.chainId);
    sequence =
      stored !== undefined && BigInt(stored) > prepared.sequenceFromChain
        ? BigInt(stored)
        : prepared.sequenceFromChain;
  }
  const approvalId = o.beforeSign ? await o.beforeSign(t) : undefined;
  o.inTime(0, 'signing');
  const signed = await deps.loader.withKey(scope.key, (pk) =>
    signChecked(scope, ops, pk, prepared, sequence),
  );
  o.inTime(RECORD_MARGIN_MS, 'recording the transaction');
  const id = randomUUID();
  const details = transferDetails(t, prepared.details);
  const nonce = sequence !== undefined ? Number(sequence) : null;
  const record = auditOf(
    scope.agent,
    'agent.sign.transaction',
    { type: 'agent', id: scope.agent.agentId },
    {
      ...o.auditDetails,
      from,
      tx_id: id,
      tx_hash: signed.txHash,
      to: prepared.to,
      value_wei: prepared.value.toString(),
      fee: prepared.fee.toString(),
      ...(nonce !== null ? { sequence: nonce } : {}),
      details,
      ...(approvalId ? { approval_id: approvalId } : {}),
    },
  );
  await failClosed(deps.logger, record.action, () =>
    deps.store.recordSignOnly(
      {
        id,
        orgId: scope.agent.orgId,
        agentId: scope.agent.agentId,
        keyId: scope.key.id,
        chainName: scope.chain.name,
        chainId: scope.chain.chainId,
        fromAddress: from,
        toAddress: prepared.to,
        valueWei: prepared.value,
        data: '0x',
        nonce,
        gasLimit: null,
        txType: 0,
        maxFeePerGas: null,
        maxPriorityFeePerGas: null,
        gasPrice: null,
        txHash: signed.txHash,
        signedTx: signed.signedTx,
        family: scope.chain.family,
        fee: prepared.fee,
        details,
      },
      record,
    ),
  );
  return {
    intentType: 'transaction',
    chain: scope.chain.name,
    from,
    signature: '',
    signedTx: signed.signedTx,
    txHash: signed.txHash,
    messageHash: null,
    typedDataHash: null,
    txType: null,
    status: 'sign_only',
    nonce,
    transactionId: id,
    fee: prepared.fee.toString(),
    approvalId: approvalId ?? null,
  };
}
