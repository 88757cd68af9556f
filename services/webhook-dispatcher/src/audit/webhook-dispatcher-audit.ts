import { type AuditRecordInput, type Executor, writeAudit } from '@custos/events';
import { outbox } from '../db/schema.js';

/**
 * Writes an audit record of webhook-dispatcher into `tx`, the transaction of the change it
 * describes (fail-closed): if the record cannot be written, the change rolls back with it. Build
 * the record with `auditOf` (@custos/events).
 */
export function audit(tx: Executor, record: AuditRecordInput): Promise<string> {
  return writeAudit(tx, outbox, record);
}
