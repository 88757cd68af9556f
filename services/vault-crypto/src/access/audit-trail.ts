import type { Principal } from '@custos/auth';
import { writeAudit } from '@custos/events';
import {
  CustosError,
  type Database,
  type Logger,
  type Transaction,
  UnavailableError,
  describeError,
} from '@custos/service-kit';
import { outbox } from '../db/schema.js';
import { actorOf } from './access-control.js';

/** What an audited action of vault-crypto names besides its actor. */
export interface AuditFacts {
  action: string;
  resourceType: 'vault' | 'secret' | 'org_key' | 'share';
  resourceId: string | null;
  metadata?: Record<string, unknown>;
}

/** Writes one audit record inside a transaction of the action it describes. */
export type AuditWrite = (tx: Transaction) => Promise<unknown>;

/**
 * vault-crypto's side of the audit log (ARCHITECTURE §2, fail-closed): records go into this
 * service's outbox in the transaction of the action, so the action commits only with its record.
 */
export class AuditTrail {
  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
  ) {}

  /** A write of `facts` by principal `p`, for a store method to run inside its transaction. */
  by(p: Principal, facts: AuditFacts): AuditWrite {
    const actor = actorOf(p);
    return (tx) =>
      writeAudit(tx, outbox, {
        orgId: p.orgId,
        actorType: actor.type,
        actorId: actor.id,
        action: facts.action,
        resourceType: facts.resourceType,
        resourceId: facts.resourceId,
        ...(facts.metadata ? { metadata: facts.metadata } : {}),
      });
  }

  /** Writes a record in a transaction of its own (for an action that has no transaction). */
  async now(p: Principal, facts: AuditFacts): Promise<void> {
    await this.db.transaction((tx) => this.by(p, facts)(tx));
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
