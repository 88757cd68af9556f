import { type SQLWrapper, and, asc, desc, eq, gt, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import { randomUUID } from 'node:crypto';
import { ConflictError, type Database, type Transaction } from '@custos/service-kit';
import { isUniqueViolation } from '../chains/chain-store.js';
import { nonces, releasedNonces, transactions, txIdempotency, txInputs } from '../db/schema.js';
import { allocateNonce } from './nonce-fns.js';
import { systemAudit } from './tx-records.js';
import type { TxRecord } from './tx-types.js';

/** A new row's fields (the store sets id-independent defaults). */
export type NewTx = typeof transactions.$inferInsert;

/** What an Idempotency-Key claim found. */
export type Claim =
  | { kind: 'claimed'; claimId: string }
  | { kind: 'other_body' }
  | { kind: 'running' }
  | { kind: 'done'; tx: TxRecord };

/** An Idempotency-Key as one request holds it: the key and the claim's token. */
export interface HeldClaim {
  key: string;
  claimId: string;
}

/** Another transaction of the chain holds one of the inputs a transfer would spend (a parallel transfer won). */
export class InputsTakenError extends Error {
  constructor() {
    super('another transaction holds one of these inputs');
    this.name = 'InputsTakenError';
  }
}

/** A transfer would spend, with the key's others not yet sent, more than the chain says it has. */
export class OverspendError extends Error {
  constructor(
    readonly asset: 'native' | 'token',
    readonly inFlight: bigint,
    readonly available: bigint,
  ) {
    super(`the key's transfers not yet sent already spend ${inFlight} of the ${available} available`);
    this.name = 'OverspendError';
  }
}

/** What a transfer spends and what the key has, for the in-flight check of `insertTransfer`. */
export interface SpendCheck {
  /** Native base units this transfer spends (its value unless a token transfer, plus its fee). */
  native: bigint;
  /** Token base units this transfer spends (token transfers). */
  token?: bigint;
  tokenMint?: string;
  available: { native: bigint; token?: bigint };
}

/**
 * The transaction `awaiting_approval` a resume names is no longer awaiting (another resume took it
 * on meanwhile): nothing was recorded.
 */
export class ResumeLostError extends Error {
  constructor(readonly txId: string) {
    super(`transaction ${txId} is no longer awaiting approval`);
    this.name = 'ResumeLostError';
  }
}

/** How long an Idempotency-Key is remembered (DECISIONS.md: 24 h). */
const IDEMPOTENCY_TTL = sql`interval '24 hours'`;

/**
 * How long a held transaction may wait for its approval id before it is taken as abandoned (its
 * request died between recording it and naming its approval; CreateApproval takes seconds).
 */
export const NEVER_ASKED_AFTER_MS = 300_000;

/** SQL of transactions, their nonces and Idempotency-Key claims. */
export class TxStore {
  constructor(private readonly db: Database) {}

  /**
   * Claims an agent's Idempotency-Key for a request with hash `hash`. The unique index decides
   * between racing requests: exactly one claims it. A claim older than 24 h is taken over, and so is
   * one older than `staleClaimMs` that never got a transaction (its request died: signer stopped
   * before it could give the claim back), and so is one whose transaction was held
   * (`awaiting_approval`) but never got its approval id within NEVER_ASKED_AFTER_MS or
   * `staleClaimMs`, the longer (signer stopped between recording it and naming its approval): that
   * transaction ends `failed`, with its record.
   * Else the existing claim answers: another body (422), still running (409), or its finished
   * transaction.
   */
  async claim(
    agentId: string,
    key: string,
    hash: string,
    staleClaimMs = NEVER_ASKED_AFTER_MS,
  ): Promise<Claim> {
    const claimId = randomUUID();
    const [mine] = await this.db
      .insert(txIdempotency)
      .values({ agentId, idempotencyKey: key, requestHash: hash, claimId })
      .onConflictDoUpdate({
        target: [txIdempotency.agentId, txIdempotency.idempotencyKey],
        set: { requestHash: hash, txId: null, claimId, createdAt: sql`now()` },
        setWhere: sql`${txIdempotency.createdAt} < now() - ${IDEMPOTENCY_TTL} or (${txIdempotency.txId} is null and ${txIdempotency.createdAt} < now() - ${`${staleClaimMs} milliseconds`}::interval)`,
      })
      .returning();
    if (mine) return { kind: 'claimed', claimId: mine.claimId };
    const [c] = await this.db
      .select()
      .from(txIdempotency)
      .where(and(eq(txIdempotency.agentId, agentId), eq(txIdempotency.idempotencyKey, key)));
    if (!c) return this.claim(agentId, key, hash, staleClaimMs); // released meanwhile: try again
    if (c.requestHash !== hash) return { kind: 'other_body' };
    if (!c.txId) return { kind: 'running' };
    const tx = await this.byId(c.txId);
    if (!tx || tx.status === 'pending' || tx.status === 'signed') return { kind: 'running' };
    // Ended by a racing claim as never asked for (below): its claim was given back, look again.
    if (tx.status === 'failed' && tx.errorMessage === TxStore.NEVER_ASKED) {
      return this.claim(agentId, key, hash, staleClaimMs);
    }
    // Held but its approval not asked for yet (CreateApproval under way): not an answer to replay;
    // held so long that its request must have died: failed, and the key is free again.
    if (tx.status === 'awaiting_approval' && !tx.approvalId) {
      const neverAskedMs = Math.max(staleClaimMs, NEVER_ASKED_AFTER_MS);
      if (!(await this.failNeverAsked(tx.id, neverAskedMs))) return { kind: 'running' };
      return this.claim(agentId, key, hash, staleClaimMs);
    }
    return { kind: 'done', tx };
  }

  /** Why a held transaction whose approval was never asked for ended. */
  static readonly NEVER_ASKED = 'the approval was never asked for: signer stopped';

  /** Held transactions (at most `batch`) still without an approval id after `staleMs`. */
  async neverAsked(staleMs: number, batch: number): Promise<string[]> {
    const rows = await this.db
      .select({ id: transactions.id })
      .from(transactions)
      .where(
        and(
          eq(transactions.status, 'awaiting_approval'),
          isNull(transactions.approvalId),
          lt(transactions.createdAt, sql`now() - ${`${staleMs} milliseconds`}::interval`),
        ),
      )
      .limit(batch);
    return rows.map((r) => r.id);
  }

  /**
   * Ends a transaction `awaiting_approval` without an approval id and older than `staleMs` as
   * `failed` (its request died between recording it and naming its approval), with signer's
   * `agent.transaction.failed` record, and gives its Idempotency-Key claim back; one transaction.
   * Undefined when it is not such a row (any more).
   */
  async failNeverAsked(id: string, staleMs: number): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ status: 'failed', errorMessage: TxStore.NEVER_ASKED })
        .where(
          and(
            eq(transactions.id, id),
            eq(transactions.status, 'awaiting_approval'),
            isNull(transactions.approvalId),
            lt(transactions.createdAt, sql`now() - ${`${staleMs} milliseconds`}::interval`),
          ),
        )
        .returning();
      if (!t) return undefined;
      await tx.delete(txIdempotency).where(eq(txIdempotency.txId, t.id));
      await systemAudit(tx, 'agent.transaction.failed', t, { error: TxStore.NEVER_ASKED });
      return t;
    });
  }

  /**
   * Gives a claim back when its request ended before a transaction was recorded. Only the request
   * holding it (its claim id) can: one whose claim was taken over leaves the new holder's alone.
   */
  async unclaim(agentId: string, c: HeldClaim): Promise<void> {
    await this.db
      .delete(txIdempotency)
      .where(
        and(
          eq(txIdempotency.agentId, agentId),
          eq(txIdempotency.idempotencyKey, c.key),
          eq(txIdempotency.claimId, c.claimId),
          isNull(txIdempotency.txId),
        ),
      );
  }

  /**
   * Links the claim to its transaction, in the transaction recording it. A claim taken over by
   * another request meanwhile (its id changed) is not this request's: 409, and the caller's
   * database transaction (nonce, row) is rolled back, so two requests never both proceed.
   */
  private async link(
    tx: Transaction,
    agentId: string,
    c: HeldClaim | undefined,
    txId: string,
  ): Promise<void> {
    if (!c) return;
    const linked = await tx
      .update(txIdempotency)
      .set({ txId })
      .where(
        and(
          eq(txIdempotency.agentId, agentId),
          eq(txIdempotency.idempotencyKey, c.key),
          eq(txIdempotency.claimId, c.claimId),
          isNull(txIdempotency.txId),
        ),
      )
      .returning({ txId: txIdempotency.txId });
    if (linked.length === 0) {
      throw new ConflictError(
        'a request with this Idempotency-Key is still running; retry later',
        'Idempotency-Key',
      );
    }
  }

  /**
   * Records a transaction that gets no nonce (simulation_failed, awaiting_approval), with its
   * record, in one transaction. With `resumeId`: the row `awaiting_approval` of that id becomes it.
   */
  async insertFinal(
    row: NewTx,
    idempotencyKey: HeldClaim | undefined,
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
    resumeId?: string,
  ): Promise<TxRecord> {
    return this.db.transaction(async (tx) => {
      const t = await this.place(tx, row, resumeId);
      await this.link(tx, row.agentId, idempotencyKey, t.id);
      await after(tx, t);
      return t;
    });
  }

  /**
   * Writes a new row, or with `resumeId` turns the row of that id, still `awaiting_approval`, into
   * it (same id and creation time; `resumed_at` set). ResumeLostError when that row is no longer
   * awaiting: the caller's database transaction rolls back.
   */
  private async place(tx: Transaction, values: NewTx, resumeId: string | undefined): Promise<TxRecord> {
    if (!resumeId) {
      const [t] = await tx.insert(transactions).values(values).returning();
      return t!;
    }
    const { id: _id, createdAt: _createdAt, ...set } = values;
    const [t] = await tx
      .update(transactions)
      .set({ ...set, resumedAt: sql`now()` })
      .where(and(eq(transactions.id, resumeId), eq(transactions.status, 'awaiting_approval')))
      .returning();
    if (!t) throw new ResumeLostError(resumeId);
    return t;
  }

  /**
   * Names the approval a transaction `awaiting_approval` waits for, with its record (`after`) in
   * the same database transaction.
   */
  async setApproval(
    id: string,
    approvalId: string,
    after: (tx: Transaction, t: TxRecord) => Promise<unknown> = async () => undefined,
  ): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ approvalId })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'awaiting_approval')))
        .returning();
      if (t) await after(tx, t);
      return t;
    });
  }

  /**
   * Ends a transaction still `awaiting_approval` as `failed` (its approval could not be asked for,
   * or was used and the resume failed before a nonce was taken), with its record, in one
   * transaction. `unclaim`: its Idempotency-Key claims go back (the request answers an error).
   */
  async failAwaiting(
    id: string,
    message: string,
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
    o: { unclaim?: boolean } = {},
  ): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ status: 'failed', errorMessage: message })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'awaiting_approval')))
        .returning();
      if (!t) return undefined;
      if (o.unclaim) await tx.delete(txIdempotency).where(eq(txIdempotency.txId, t.id));
      await after(tx, t);
      return t;
    });
  }

  /**
   * Allocates the key's next nonce on the chain and records the transaction holding it (status
   * `pending`) in one database transaction, under the lock of the key's `nonces` row, so parallel
   * submissions get distinct consecutive nonces. `chainPending` is the chain's pending nonce.
   */
  async allocateAndInsert(
    row: Omit<NewTx, 'nonce' | 'nonceHeld' | 'status'>,
    chainPending: number,
    idempotencyKey: HeldClaim | undefined,
    resumeId?: string,
  ): Promise<TxRecord> {
    return this.db.transaction((tx) => this.allocateIn(tx, row, chainPending, idempotencyKey, resumeId));
  }

  /**
   * Records a non-EVM transfer (`pending`) with what it holds, in one transaction: its sequence
   * (chains that order an account's transactions by number, allocated as EVM nonces are, when
   * `chainSequence` is given) and its inputs (UTXO chains; InputsTakenError when a parallel transfer
   * holds one, and then nothing is recorded).
   */
  async insertTransfer(
    row: Omit<NewTx, 'nonce' | 'nonceHeld' | 'status'>,
    chainSequence: number | undefined,
    inputs: readonly string[],
    idempotencyKey: HeldClaim | undefined,
    spend?: SpendCheck,
    resumeId?: string,
  ): Promise<TxRecord> {
    try {
      return await this.db.transaction(async (tx) => {
        if (spend) await this.checkSpend(tx, row.keyId, row.chainName, spend);
        let t: TxRecord;
        if (chainSequence !== undefined) {
          t = await this.allocateIn(tx, row, chainSequence, idempotencyKey, resumeId);
        } else {
          t = await this.place(tx, { ...row, status: 'pending' }, resumeId);
          await this.link(tx, row.agentId, idempotencyKey, t.id);
        }
        if (inputs.length > 0) {
          await tx.insert(txInputs).values(
            inputs.map((inputRef) => ({
              chainName: row.chainName,
              inputRef,
              keyId: row.keyId,
              txId: t.id,
            })),
          );
        }
        return t;
      });
    } catch (err) {
      if (inputs.length > 0 && isUniqueViolation(err)) throw new InputsTakenError();
      throw err;
    }
  }

  /**
   * Refuses (OverspendError) a transfer that, with the key's transfers on the chain not yet given
   * to the node (`pending`, `signed`), spends more than is available. Runs under a transaction-scoped
   * advisory lock of the key and chain, held until the new row commits, so parallel transfers are
   * checked one after another. Broadcast transfers count until the watcher settles them (a node's
   * balance may not show an accepted transfer until it is included — a minute on Solana under
   * load): conservative, a transfer the balance already shows may count twice meanwhile. A fee
   * counts as the transfer expects to pay it (`details.expected_fee`, Tron TRC-20's dry-run burn)
   * when that is less than its most.
   */
  private async checkSpend(tx: Transaction, keyId: string, chainName: string, s: SpendCheck): Promise<void> {
    await tx.execute(
      sql`select pg_advisory_xact_lock(hashtextextended(${`spend:${keyId}:${chainName}`}, 0))`,
    );
    const r = await tx.execute(sql`
      select
        coalesce(sum(
          case when details->>'expected_fee' ~ '^[0-9]{1,78}$'
            then least((details->>'expected_fee')::numeric, coalesce(fee, 0))
            else coalesce(fee, 0) end), 0)
          + coalesce(sum(value_wei) filter (where nullif(details->>'token_mint', '') is null), 0) as native,
        coalesce(sum(value_wei) filter (where details->>'token_mint' = ${s.tokenMint ?? ''}), 0) as token
      from ${transactions}
      where key_id = ${keyId} and chain_name = ${chainName} and status in ('pending', 'signed', 'broadcast')`);
    const row = (r as unknown as { rows: { native: string; token: string }[] }).rows[0]!;
    const native = BigInt(row.native);
    if (native + s.native > s.available.native)
      throw new OverspendError('native', native, s.available.native);
    if (s.token !== undefined && s.available.token !== undefined) {
      const token = BigInt(row.token);
      if (token + s.token > s.available.token) throw new OverspendError('token', token, s.available.token);
    }
  }

  /** The inputs the key's transactions on the chain hold (not to be spent by another). */
  async inputsInUse(keyId: string, chainName: string): Promise<Set<string>> {
    const rows = await this.db
      .select({ ref: txInputs.inputRef })
      .from(txInputs)
      .where(and(eq(txInputs.keyId, keyId), eq(txInputs.chainName, chainName)));
    return new Set(rows.map((r) => r.ref));
  }

  private async allocateIn(
    tx: Transaction,
    row: Omit<NewTx, 'nonce' | 'nonceHeld' | 'status'>,
    chainPending: number,
    idempotencyKey: HeldClaim | undefined,
    resumeId: string | undefined,
  ): Promise<TxRecord> {
    {
      const where = and(eq(nonces.keyId, row.keyId), eq(nonces.chainId, row.chainId));
      await tx
        .insert(nonces)
        .values({ keyId: row.keyId, chainId: row.chainId, nextNonce: 0 })
        .onConflictDoNothing();
      const [n] = await tx.select().from(nonces).where(where).for('update');
      const released = await tx
        .select({ nonce: releasedNonces.nonce })
        .from(releasedNonces)
        .where(and(eq(releasedNonces.keyId, row.keyId), eq(releasedNonces.chainId, row.chainId)));
      const a = allocateNonce({
        chainPending,
        storedNext: n!.nextNonce,
        released: released.map((r) => r.nonce),
      });
      if (a.drop.length > 0) {
        await tx
          .delete(releasedNonces)
          .where(
            and(
              eq(releasedNonces.keyId, row.keyId),
              eq(releasedNonces.chainId, row.chainId),
              inArray(releasedNonces.nonce, a.drop),
            ),
          );
      }
      await tx
        .update(nonces)
        .set({ nextNonce: a.next, updatedAt: sql`now()` })
        .where(where);
      const t = await this.place(
        tx,
        { ...row, nonce: a.nonce, nonceHeld: true, status: 'pending' },
        resumeId,
      );
      await this.link(tx, row.agentId, idempotencyKey, t.id);
      return t;
    }
  }

  /** Moves `pending` to `signed` with the signed bytes, and its audit record, in one transaction. */
  async markSigned(
    id: string,
    signed: { signedTx: string; txHash: string },
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
  ): Promise<TxRecord> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ status: 'signed', signedTx: signed.signedTx, txHash: signed.txHash, signedAt: sql`now()` })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'pending')))
        .returning();
      if (!t) throw new Error(`transaction ${id} is no longer pending`);
      await after(tx, t);
      return t;
    });
  }

  /**
   * Records that the signed bytes are about to be given to the node (before the call). Throws when
   * the row is no longer `signed` or the database fails: then nothing may be sent.
   */
  async markSendAttempted(id: string): Promise<TxRecord> {
    const [t] = await this.db
      .update(transactions)
      .set({ sendAttemptedAt: sql`now()` })
      .where(and(eq(transactions.id, id), eq(transactions.status, 'signed')))
      .returning();
    if (!t) throw new Error(`transaction ${id} is no longer signed`);
    return t;
  }

  /** Moves `signed` to `broadcast` (the watcher follows it from now), with its event and record. */
  async markBroadcast(
    id: string,
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
  ): Promise<TxRecord> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ status: 'broadcast', broadcastAt: sql`now()`, watchAfter: sql`now()` })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'signed')))
        .returning();
      if (!t) {
        // The watcher re-sent it meanwhile: answer the row as it is, without a second event.
        const [now] = await tx.select().from(transactions).where(eq(transactions.id, id));
        if (!now || now.status === 'pending' || now.status === 'signed') {
          throw new Error(`transaction ${id} cannot be marked broadcast`);
        }
        return now;
      }
      await after(tx, t);
      return t;
    });
  }

  /**
   * Leases up to `batch` rows left in `status` (`pending` or `signed`) for longer than `staleMs`
   * (their request ended without finishing: signer stopped), for `leaseMs`, skipping locked rows.
   */
  async leaseStale(
    status: 'pending' | 'signed',
    staleMs: number,
    batch: number,
    leaseMs: number,
  ): Promise<TxRecord[]> {
    const due = this.db
      .select({ id: transactions.id })
      .from(transactions)
      .where(
        and(
          eq(transactions.status, status),
          // A resumed row (approvals) is as old as its resume, not as its hold.
          lt(
            sql`coalesce(${transactions.resumedAt}, ${transactions.createdAt})`,
            sql`now() - ${`${staleMs} milliseconds`}::interval`,
          ),
          or(isNull(transactions.watchAfter), lt(transactions.watchAfter, sql`now()`)),
        ),
      )
      .limit(batch)
      .for('update', { skipLocked: true });
    return this.lease(due, leaseMs);
  }

  /**
   * Ends a transaction that never reached the node as `failed`: it stops holding its nonce, which
   * goes to the released pool for the next allocation (no gap), with its record, in one transaction.
   * `giveBack: false` when the chain used the nonce for another transaction (nothing to give back).
   * The signed bytes are dropped (the nonce may be reused: they must not be sent, nor read).
   * `unclaim`: the request answers an error (503), so its Idempotency-Key claim is given back
   * and a retry runs anew rather than replaying `failed`.
   */
  async failBeforeBroadcast(
    id: string,
    message: string,
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
    o: { giveBack?: boolean; unclaim?: boolean } = {},
  ): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ status: 'failed', errorMessage: message, nonceHeld: false, signedTx: null })
        .where(and(eq(transactions.id, id), inArray(transactions.status, ['pending', 'signed'])))
        .returning();
      if (!t) return undefined;
      if (t.nonce !== null && o.giveBack !== false) {
        await tx
          .insert(releasedNonces)
          .values({ keyId: t.keyId, chainId: t.chainId, nonce: t.nonce })
          .onConflictDoNothing();
      }
      if (o.unclaim) await tx.delete(txIdempotency).where(eq(txIdempotency.txId, t.id));
      await tx.delete(txInputs).where(eq(txInputs.txId, t.id));
      await after(tx, t);
      return t;
    });
  }

  async byId(id: string): Promise<TxRecord | undefined> {
    const [t] = await this.db.select().from(transactions).where(eq(transactions.id, id));
    return t;
  }

  /** One transaction of an agent of the org. */
  async get(orgId: string, agentId: string, id: string): Promise<TxRecord | undefined> {
    const [t] = await this.db
      .select()
      .from(transactions)
      .where(and(eq(transactions.id, id), eq(transactions.orgId, orgId), eq(transactions.agentId, agentId)));
    return t;
  }

  /** A page of an agent's transactions, newest first, after the row `afterId` when given. */
  async list(orgId: string, agentId: string, limit: number, afterId?: string): Promise<TxRecord[]> {
    const mine = and(eq(transactions.orgId, orgId), eq(transactions.agentId, agentId));
    let where = mine;
    if (afterId) {
      const [c] = await this.db
        .select({ createdAt: transactions.createdAt, id: transactions.id })
        .from(transactions)
        .where(and(mine, eq(transactions.id, afterId)));
      if (!c) return [];
      where = and(
        mine,
        sql`(${transactions.createdAt}, ${transactions.id}) < (select t.created_at, t.id from ${transactions} t where t.id = ${afterId})`,
      );
    }
    return this.db
      .select()
      .from(transactions)
      .where(where)
      .orderBy(desc(transactions.createdAt), desc(transactions.id))
      .limit(limit);
  }

  /** Leases the rows `due` selects (locked, skipping locked ones) for `leaseMs`: one statement. */
  private lease(due: SQLWrapper, leaseMs: number): Promise<TxRecord[]> {
    return this.db
      .update(transactions)
      .set({ watchAfter: sql`now() + ${`${leaseMs} milliseconds`}::interval` })
      .where(inArray(transactions.id, due))
      .returning();
  }

  /**
   * Takes up to `batch` broadcast transactions due for a receipt check and leases them for
   * `leaseMs` (other replicas skip the locked and leased rows), so one replica acts on a row at a time.
   */
  async leaseForWatch(batch: number, leaseMs: number): Promise<TxRecord[]> {
    const due = this.db
      .select({ id: transactions.id })
      .from(transactions)
      .where(
        and(
          eq(transactions.status, 'broadcast'),
          or(isNull(transactions.watchAfter), lt(transactions.watchAfter, sql`now()`)),
        ),
      )
      .orderBy(asc(transactions.watchAfter))
      .limit(batch)
      .for('update', { skipLocked: true });
    return this.lease(due, leaseMs);
  }

  /**
   * Keeps rows leased while a round still works on them: their lease moves to `leaseMs` from now.
   * A row whose lease already ran out is left to whoever leases it next.
   */
  async renewLease(ids: string[], leaseMs: number): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .update(transactions)
      .set({ watchAfter: sql`now() + ${`${leaseMs} milliseconds`}::interval` })
      .where(
        and(
          inArray(transactions.id, ids),
          // Only rows still being worked on: a row concluded (or failed) meanwhile is left alone.
          inArray(transactions.status, ['broadcast', 'signed']),
          gt(transactions.watchAfter, sql`now()`),
        ),
      );
  }

  /** Not mined yet: look again after `delayMs`. */
  async watchLater(id: string, delayMs: number): Promise<void> {
    await this.db
      .update(transactions)
      .set({ watchAfter: sql`now() + ${`${delayMs} milliseconds`}::interval` })
      .where(and(eq(transactions.id, id), eq(transactions.status, 'broadcast')));
  }

  /**
   * A broadcast transaction that will never be mined: the chain mined another transaction with its
   * nonce (replaced, or dropped and the nonce reused). `failed` with the reason; its nonce is used
   * on chain, so it is not given back.
   */
  async dropBroadcast(id: string, message: string): Promise<TxRecord | undefined> {
    const [t] = await this.db
      .update(transactions)
      .set({ status: 'failed', errorMessage: message, watchAfter: null })
      .where(and(eq(transactions.id, id), eq(transactions.status, 'broadcast')))
      .returning();
    return t;
  }

  /**
   * Records (`block`) or clears (null) the head at which the watcher first saw this broadcast
   * transaction look dropped.
   */
  async markDropSeen(id: string, block: bigint | null): Promise<void> {
    await this.db
      .update(transactions)
      .set({ dropSeenBlock: block })
      .where(and(eq(transactions.id, id), eq(transactions.status, 'broadcast')));
  }

  /**
   * A broadcast non-EVM transfer the chain can no longer include (its blockhash, ledger, ttl or
   * expiration passed; an input spent by another): `failed`, its inputs freed and its sequence
   * (never used on chain) given back for the next allocation, in one transaction.
   */
  async expire(
    id: string,
    message: string,
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
  ): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({ status: 'failed', errorMessage: message, watchAfter: null, nonceHeld: false })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'broadcast')))
        .returning();
      if (!t) return undefined;
      if (t.nonce !== null) {
        await tx
          .insert(releasedNonces)
          .values({ keyId: t.keyId, chainId: t.chainId, nonce: t.nonce })
          .onConflictDoNothing();
      }
      await tx.delete(txInputs).where(eq(txInputs.txId, t.id));
      await after(tx, t);
      return t;
    });
  }

  /**
   * A non-EVM transfer the chain included: `confirmed`, or `failed` when the chain's execution
   * failed it (its fee is spent, its inputs and sequence used), with the block and the fee paid.
   */
  async settleTransfer(
    id: string,
    r: { ok: boolean; block?: bigint | undefined; fee?: bigint | undefined; reason?: string },
    after: (tx: Transaction, t: TxRecord) => Promise<unknown>,
  ): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({
          status: r.ok ? 'confirmed' : 'failed',
          blockNumber: r.block ?? null,
          ...(r.fee !== undefined ? { fee: r.fee.toString() } : {}),
          confirmedAt: sql`now()`,
          watchAfter: null,
          ...(r.ok
            ? {}
            : { errorMessage: `the chain failed the transaction: ${r.reason ?? 'unknown reason'}` }),
        })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'broadcast')))
        .returning();
      if (!t) return undefined;
      await after(tx, t);
      return t;
    });
  }

  /** Records the receipt: `confirmed` (status 1) or `failed` (status 0). */
  async settle(
    id: string,
    r: { ok: boolean; blockNumber: bigint; gasUsed: bigint },
    after?: (tx: Transaction, t: TxRecord) => Promise<unknown>,
  ): Promise<TxRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [t] = await tx
        .update(transactions)
        .set({
          status: r.ok ? 'confirmed' : 'failed',
          blockNumber: r.blockNumber,
          gasUsed: r.gasUsed.toString(),
          confirmedAt: sql`now()`,
          watchAfter: null,
          ...(r.ok ? {} : { errorMessage: 'the transaction reverted on chain (receipt status 0)' }),
        })
        .where(and(eq(transactions.id, id), eq(transactions.status, 'broadcast')))
        .returning();
      if (t && after) await after(tx, t);
      return t;
    });
  }
}
