import { type AuditRecordInput, writeEvent } from '@custos/events';
import type { Database } from '@custos/service-kit';
import { and, eq } from 'drizzle-orm';
import { writeSignerAudit } from '../audit/signer-audit.js';
import { nonces, outbox, transactions } from '../db/schema.js';

/** A sign-only transaction as it is kept: listed with the agent's transactions, status `sign_only`. */
export interface SignOnlyTxRow {
  id: string;
  orgId: string;
  agentId: string;
  keyId: string;
  chainName: string;
  chainId: bigint;
  fromAddress: string;
  toAddress: string | null;
  valueWei: bigint;
  data: string;
  /** EVM nonce, or the sequence of chains that number an account's transactions (XRP); null for others. */
  nonce: number | null;
  /** EVM only (null for other families). */
  gasLimit: bigint | null;
  txType: 0 | 2;
  /** The chain's family (`evm` when absent). */
  family?: string;
  /** Non-EVM: the most it pays in fees (native base unit) and the transfer's details. */
  fee?: bigint;
  details?: Record<string, string>;
  maxFeePerGas: bigint | null;
  maxPriorityFeePerGas: bigint | null;
  gasPrice: bigint | null;
  txHash: string;
  signedTx: string;
}

/** The event `agent.transaction.signed` carries (never the signed bytes, never a key). */
export function signedEventData(r: SignOnlyTxRow, signedAt: Date): Record<string, unknown> {
  // The same members as agent.transaction.broadcast's, so that one receiver reads both.
  return {
    tx_id: r.id,
    agent_id: r.agentId,
    chain: r.chainName,
    chain_id: r.chainId.toString(),
    from: r.fromAddress,
    to: r.toAddress,
    value_wei: r.valueWei.toString(),
    nonce: r.nonce,
    tx_hash: r.txHash,
    ...(r.family && r.family !== 'evm'
      ? {
          family: r.family,
          ...(r.fee !== undefined ? { fee: r.fee.toString() } : {}),
          details: r.details ?? {},
        }
      : { tx_type: r.txType }),
    status: 'sign_only',
    signed_at: signedAt.toISOString(),
  };
}

/** SQL of sign intents: a signature's audit record, and a sign-only transaction's row and event. */
export class SignStore {
  constructor(private readonly db: Database) {}

  /**
   * The next nonce the Transactions API would give out for the key on the chain (its `nonces` row),
   * read only (nothing is reserved); undefined when it never gave one out.
   */
  async nextNonce(keyId: string, chainId: bigint): Promise<number | undefined> {
    const [r] = await this.db
      .select({ next: nonces.nextNonce })
      .from(nonces)
      .where(and(eq(nonces.keyId, keyId), eq(nonces.chainId, chainId)));
    return r?.next;
  }

  /** Commits the audit record of a signature (before the signature is answered). */
  async recordSignature(record: AuditRecordInput): Promise<void> {
    await this.db.transaction((tx) => writeSignerAudit(tx, record));
  }

  /**
   * Commits a sign-only transaction in one database transaction: its row (status `sign_only`; it
   * holds no nonce of the service's allocator: the caller broadcasts it, or not), its audit record
   * and the `agent.transaction.signed` event.
   */
  async recordSignOnly(r: SignOnlyTxRow, record: AuditRecordInput): Promise<void> {
    const now = new Date();
    await this.db.transaction(async (tx) => {
      await tx.insert(transactions).values({
        id: r.id,
        orgId: r.orgId,
        agentId: r.agentId,
        keyId: r.keyId,
        chainName: r.chainName,
        chainId: r.chainId,
        fromAddress: r.fromAddress,
        toAddress: r.toAddress,
        valueWei: r.valueWei.toString(),
        data: r.data,
        nonce: r.nonce,
        nonceHeld: false,
        gasLimit: r.gasLimit?.toString() ?? null,
        family: r.family ?? 'evm',
        fee: r.fee?.toString() ?? null,
        details: r.details ?? {},
        txType: r.txType,
        maxFeePerGas: r.maxFeePerGas?.toString() ?? null,
        maxPriorityFeePerGas: r.maxPriorityFeePerGas?.toString() ?? null,
        gasPrice: r.gasPrice?.toString() ?? null,
        status: 'sign_only',
        txHash: r.txHash,
        signedTx: r.signedTx,
        createdAt: now,
        signedAt: now,
      });
      await writeSignerAudit(tx, record);
      await writeEvent(tx, outbox, {
        name: 'agent.transaction.signed',
        orgId: r.orgId,
        data: signedEventData(r, now),
      });
    });
  }
}
