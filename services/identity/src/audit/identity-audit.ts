import { type AuditRecordInput, type Executor, writeAudit } from '@custos/events';
import { createLogger, describeError } from '@custos/service-kit';
import { outbox } from '../db/schema.js';

/** Anything that runs a function in one database transaction (the identity stores do). */
export interface Transactional {
  transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T>;
}

// Refusals are audited best-effort (see auditRefusal); their failures go to this log line.
const logger = createLogger({ service: 'identity', level: process.env['LOG_LEVEL'] ?? 'info' });

/**
 * Writes an audit record of identity into `tx`, the transaction of the change it describes
 * (ARCHITECTURE §2, fail-closed): if the record cannot be written, the change rolls back with it.
 * A signed-in caller's action is described with `auditOf` of `@custos/events`; sign-ins, refusals
 * and actions of people proving themselves by other means (e-mailed tokens) spell the record out.
 */
export function audit(tx: Executor, record: AuditRecordInput): Promise<string> {
  return writeAudit(tx, outbox, record);
}

/**
 * Records a refused authentication (`auth.login_failed`, `auth.mfa_failed`) in a small transaction
 * of its own. The caller is refused either way, so a record that cannot be written is logged and
 * never changes the answer.
 */
export async function auditRefusal(db: Transactional, record: AuditRecordInput): Promise<void> {
  try {
    await db.transaction((tx) => audit(tx, record));
  } catch (err) {
    logger.error({ err: describeError(err), action: record.action }, 'audit record of a refusal not written');
  }
}
