import type { AgentPrincipal } from '@custos/auth';
import { type AuditRecordInput, auditOf, writeEvent } from '@custos/events';
import type { Transaction } from '@custos/service-kit';
import { writeSignerAudit } from '../audit/signer-audit.js';
import { outbox } from '../db/schema.js';
import type { TxRecord } from './tx-types.js';

/** Who a transaction's record names: the agent whose request it is, or signer itself (recovery). */
export type TxActor = AgentPrincipal | 'system';

/** What the record of a transaction names (never the signed bytes, never a key). */
export function txDetails(t: TxRecord): Record<string, unknown> {
  return {
    tx_id: t.id,
    chain: t.chainName,
    chain_id: t.chainId.toString(),
    from: t.fromAddress,
    to: t.toAddress,
    value_wei: t.valueWei,
    nonce: t.nonce,
    ...(t.txHash ? { tx_hash: t.txHash } : {}),
    ...(t.family !== 'evm'
      ? { family: t.family, ...(t.fee !== null ? { fee: t.fee } : {}), details: t.details }
      : {}),
  };
}

/** The audit record of `action` on transaction `t`. */
export function txAudit(
  actor: TxActor,
  action: string,
  t: TxRecord,
  extra: Record<string, unknown> = {},
): AuditRecordInput {
  const details = { ...txDetails(t), ...extra };
  if (actor === 'system') {
    return {
      orgId: t.orgId,
      actorType: 'system',
      actorId: null,
      action,
      resourceType: 'transaction',
      resourceId: t.id,
      metadata: details,
    };
  }
  return auditOf(actor, action, { type: 'transaction', id: t.id }, details);
}

/** Writes the record and the webhook event of a broadcast, in the transaction that records it. */
export async function writeBroadcast(tx: Transaction, actor: TxActor, t: TxRecord): Promise<void> {
  await writeSignerAudit(tx, txAudit(actor, 'agent.transaction.broadcast', t));
  await writeEvent(tx, outbox, {
    name: 'agent.transaction.broadcast',
    orgId: t.orgId,
    data: {
      ...txDetails(t),
      agent_id: t.agentId,
      broadcast_at: t.broadcastAt?.toISOString() ?? new Date().toISOString(),
    },
  });
}

/** Writes the record of `action` on transaction `t` by signer itself (the watcher, recovery). */
export function systemAudit(
  tx: Transaction,
  action: string,
  t: TxRecord,
  extra: Record<string, unknown> = {},
): Promise<string> {
  return writeSignerAudit(tx, txAudit('system', action, t, extra));
}
