import { randomUUID } from 'node:crypto';
import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import type { GuardrailTotals } from '@custos/guardrails';
import { guardrailLedger, guardrailReservations } from '../db/schema.js';

/** The current UTC calendar day, as the database sees it (one clock for every signer replica). */
const UTC_DAY = sql<string>`to_char(now() at time zone 'UTC', 'YYYY-MM-DD')`;

/** Where a reservation goes: the agent's row of one chain and the current UTC day. */
export interface LedgerKey {
  orgId: string;
  agentId: string;
  chainName: string;
  family: string;
}

/** What a request would add to the day's totals. */
export interface LedgerAmounts {
  value: bigint;
  gas: bigint;
  kind: 'transaction' | 'sign_only';
}

/** One chain's totals of the day, for the agent record (`tx_spent_today_by_chain`). */
export interface DayTotals extends GuardrailTotals {
  chainName: string;
  family: string;
  day: string;
}

/**
 * The guardrail running totals in signer's schema: per agent, chain and UTC day. `judge` locks the
 * day's row (creating it at zero), hands its totals to a decision, and adds the amounts when the
 * decision admits the request, all in one database transaction: parallel requests of one agent on
 * one chain are judged one after the other, each against the totals the previous ones left, so
 * together they cannot pass a cap.
 */
export class GuardrailLedger {
  constructor(private readonly db: Database) {}

  async judge<T>(
    key: LedgerKey,
    amounts: LedgerAmounts | undefined,
    decide: (totals: GuardrailTotals, tx: Transaction) => Promise<{ admit: boolean; result: T }>,
  ): Promise<{ result: T; reservationId: string | undefined }> {
    return this.db.transaction(async (tx) => {
      await tx
        .insert(guardrailLedger)
        .values({
          agentId: key.agentId,
          orgId: key.orgId,
          chainName: key.chainName,
          family: key.family,
          day: UTC_DAY,
        })
        .onConflictDoNothing();
      const [row] = await tx
        .select()
        .from(guardrailLedger)
        .where(
          and(
            eq(guardrailLedger.agentId, key.agentId),
            eq(guardrailLedger.chainName, key.chainName),
            eq(guardrailLedger.day, UTC_DAY),
          ),
        )
        .for('update');
      if (!row) throw new Error('the guardrail ledger row of the day was not found after its insert');
      const totals: GuardrailTotals = {
        spent: BigInt(row.valueSpent),
        gasSpent: BigInt(row.gasSpent),
        count: row.txCount,
      };
      const { admit, result } = await decide(totals, tx);
      if (!admit || !amounts) return { result, reservationId: undefined };
      await tx
        .update(guardrailLedger)
        .set({
          valueSpent: sql`${guardrailLedger.valueSpent} + ${amounts.value.toString()}::numeric`,
          gasSpent: sql`${guardrailLedger.gasSpent} + ${amounts.gas.toString()}::numeric`,
          txCount: sql`${guardrailLedger.txCount} + 1`,
          updatedAt: sql`now()`,
        })
        .where(
          and(
            eq(guardrailLedger.agentId, key.agentId),
            eq(guardrailLedger.chainName, key.chainName),
            eq(guardrailLedger.day, row.day),
          ),
        );
      const id = randomUUID();
      await tx.insert(guardrailReservations).values({
        id,
        agentId: key.agentId,
        chainName: key.chainName,
        day: row.day,
        value: amounts.value.toString(),
        gas: amounts.gas.toString(),
        kind: amounts.kind,
      });
      return { result, reservationId: id };
    });
  }

  /**
   * Gives a reservation back (a transaction that ended before it reached the chain): once only,
   * to the day it was taken on. True when this call released it.
   */
  async release(reservationId: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const [r] = await tx
        .update(guardrailReservations)
        .set({ releasedAt: sql`now()` })
        .where(and(eq(guardrailReservations.id, reservationId), isNull(guardrailReservations.releasedAt)))
        .returning();
      if (!r) return false;
      await tx
        .update(guardrailLedger)
        .set({
          valueSpent: sql`greatest(${guardrailLedger.valueSpent} - ${r.value}::numeric, 0)`,
          gasSpent: sql`greatest(${guardrailLedger.gasSpent} - ${r.gas}::numeric, 0)`,
          txCount: sql`greatest(${guardrailLedger.txCount} - 1, 0)`,
          updatedAt: sql`now()`,
        })
        .where(
          and(
            eq(guardrailLedger.agentId, r.agentId),
            eq(guardrailLedger.chainName, r.chainName),
            eq(guardrailLedger.day, r.day),
          ),
        );
      return true;
    });
  }

  /** The agent's totals of the current UTC day, one per chain it used today. */
  async today(agentId: string): Promise<DayTotals[]> {
    const rows = await this.db
      .select()
      .from(guardrailLedger)
      .where(and(eq(guardrailLedger.agentId, agentId), eq(guardrailLedger.day, UTC_DAY)));
    return rows.map((r) => ({
      chainName: r.chainName,
      family: r.family,
      day: r.day,
      spent: BigInt(r.valueSpent),
      gasSpent: BigInt(r.gasSpent),
      count: r.txCount,
    }));
  }
}
