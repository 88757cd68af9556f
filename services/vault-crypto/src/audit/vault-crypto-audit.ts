import type { Principal } from '@custos/auth';
import {
  type AuditRecordInput,
  type OutboxGroupCommit,
  type OutboxRow,
  auditOf,
  auditOutboxRowOf,
  writeAudit,
} from '@custos/events';
import {
  CustosError,
  type Database,
  type Logger,
  type Transaction,
  UnavailableError,
  describeError,
} from '@custos/service-kit';
import { outbox } from '../db/schema.js';

/** What vault-crypto audits: the kinds of resource its records name. */
export type AuditedResource = { type: 'vault' | 'secret' | 'org_key' | 'share'; id: string | null };

/**
 * Writes one audit record inside a transaction of the action it describes; `grouped()` commits it
 * alone instead (for an action whose only write is its record), in a group commit.
 */
export type AuditWrite = ((tx: Transaction) => Promise<unknown>) & { grouped(): Promise<unknown> };

/** Writes a record into this service's outbox, inside the caller's transaction. */
export function writeVaultCryptoAudit(tx: Transaction, record: AuditRecordInput): Promise<string> {
  return writeAudit(tx, outbox, record);
}

/**
 * vault-crypto's side of the audit log (ARCHITECTURE §2, fail-closed): records go into this
 * service's outbox in the transaction of the action, so the action commits only with its record.
 */
export class VaultCryptoAudit {
  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
    /** Group commit of records that are an action's only write (OutboxGroupCommit). */
    private readonly commits?: OutboxGroupCommit,
  ) {}

  /** A write of the record of `p`'s action, for a store method to run inside its transaction. */
  by(
    p: Principal,
    action: string,
    resource: AuditedResource,
    details: Record<string, unknown> = {},
  ): AuditWrite {
    const record = auditOf(p, action, resource, details);
    const write = (tx: Transaction) => writeVaultCryptoAudit(tx, record);
    return Object.assign(write, {
      grouped: () => (this.commits ? this.commits.audit(record) : this.db.transaction((tx) => write(tx))),
    });
  }

  /** The outbox row of `p`'s action, for a store method that inserts it in its own SQL. */
  rowOf(
    p: Principal,
    action: string,
    resource: AuditedResource,
    details: Record<string, unknown> = {},
  ): OutboxRow {
    return auditOutboxRowOf(auditOf(p, action, resource, details));
  }

  /** Writes a record in a transaction of its own (for an action that has no transaction). */
  async now(
    p: Principal,
    action: string,
    resource: AuditedResource,
    details: Record<string, unknown> = {},
  ): Promise<void> {
    await this.db.transaction((tx) => this.by(p, action, resource, details)(tx));
  }

  /**
   * Runs an audited database step. A failure that is not a domain refusal (the outbox refused the
   * record, the database is gone) is logged and answered 503: the action did not happen, and the
   * database's own error text never reaches the caller.
   */
  async failClosed<T>(action: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      if (err instanceof CustosError) throw err;
      this.logger.error({ err: describeError(err), action }, 'audited action refused: not committed');
      throw new UnavailableError(
        'the action was refused because it could not be committed with its audit record',
      );
    }
  }
}

/**
 * The audit record of a share action: the signed-in caller's (auditOf), or an anonymous opener's
 * (a link needs no token). The share's org is the record's org in both cases.
 */
export function shareAudit(
  s: { id: string; orgId: string },
  caller: Principal | undefined,
  action: string,
  details: Record<string, unknown>,
): AuditRecordInput {
  const resource = { type: 'share', id: s.id };
  if (caller) return { ...auditOf(caller, action, resource, details), orgId: s.orgId };
  return {
    orgId: s.orgId,
    actorType: 'anonymous',
    actorId: null,
    action,
    resourceType: resource.type,
    resourceId: resource.id,
    metadata: details,
  };
}
