import type { UserPrincipal } from '@custos/auth';
import { type AuditRecordInput, auditOf, writeAudit } from '@custos/events';
import type { Transaction } from '@custos/service-kit';
import { outbox } from '../db/schema.js';
import { grantAuditDetails } from '../grants/grant-fns.js';
import type { GrantRecord } from '../grants/grant-types.js';
import type { IpRuleRecord } from '../ip-rules/ip-rule-types.js';

/**
 * Writes one of policy's audit records into the transaction of the change it describes: it
 * travels through this service's outbox, so the change commits only with its record (fail-closed).
 */
export function writePolicyAudit(tx: Transaction, record: AuditRecordInput): Promise<string> {
  return writeAudit(tx, outbox, record);
}

/** The record of a change to a grant (`policy.created`, `policy.updated`, `policy.deleted`). */
export function grantAudit(
  caller: UserPrincipal,
  action: string,
  g: GrantRecord,
  changed?: string[],
): AuditRecordInput {
  return auditOf(caller, action, { type: 'policy', id: g.id }, grantAuditDetails(g, changed));
}

/** The record of a change to an IP rule (`ip_rule.created`, `ip_rule.deleted`). */
export function ipRuleAudit(caller: UserPrincipal, action: string, r: IpRuleRecord): AuditRecordInput {
  return auditOf(caller, action, { type: 'ip_rule', id: r.id }, { cidr: r.cidr, rule_type: r.ruleType });
}
