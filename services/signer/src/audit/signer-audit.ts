import { type AuditRecordInput, writeAudit } from '@custos/events';
import {
  CustosError,
  type Logger,
  type Transaction,
  UnavailableError,
  describeError,
} from '@custos/service-kit';
import { outbox } from '../db/schema.js';

/**
 * Writes one of signer's audit records into the transaction of the change it describes: it travels
 * through this service's outbox, so the change commits only with its record (fail-closed).
 */
export function writeSignerAudit(tx: Transaction, record: AuditRecordInput): Promise<string> {
  return writeAudit(tx, outbox, record);
}

/**
 * Runs an audited database step: a failure that is not a domain refusal (the outbox refused the
 * record, the database is gone) is logged and answered 503 without the database's text.
 */
export async function failClosed<T>(logger: Logger, action: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof CustosError) throw err;
    logger.error({ err: describeError(err), action }, 'audited action refused: not committed');
    throw new UnavailableError(
      'the action was refused because it could not be committed with its audit record',
    );
  }
}
