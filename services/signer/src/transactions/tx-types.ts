import type { transactions } from '../db/schema.js';

/** One stored transaction row. */
export type TxRecord = typeof transactions.$inferSelect;

/** A transaction's state. */
export type TxStatus =
  | 'awaiting_approval'
  | 'pending'
  | 'signed'
  | 'sign_only'
  | 'broadcast'
  | 'confirmed'
  | 'failed'
  | 'simulation_failed';

/** The states in which a submission is still being worked on (an Idempotency-Key repeat gets 409). */
export const IN_FLIGHT: readonly string[] = ['pending', 'signed'];
