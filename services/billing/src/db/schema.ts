import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import { check, pgSchema, text, timestamp, uuid } from 'drizzle-orm/pg-core';

/** The Postgres schema the billing service owns; no other service reads it. */
export const SCHEMA = 'billing';
export const billingSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(billingSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(billingSchema);

/** The plan assigned to an org; an org without a row is on the configured default plan. */
export const orgPlans = billingSchema.table(
  'org_plans',
  {
    orgId: uuid('org_id').primaryKey(),
    plan: text('plan').notNull(),
    assignedBy: uuid('assigned_by'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check('org_plans_plan_known', sql`${t.plan} in ('free', 'pro', 'business', 'enterprise')`)],
);
