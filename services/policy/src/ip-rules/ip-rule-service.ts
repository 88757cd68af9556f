import type { Principal, UserPrincipal } from '@custos/auth';
import { writeAudit } from '@custos/events';
import type { IpRule } from '@custos/proto/custos/policy/v1/messages';
import { ConflictError, NotFoundError, PermissionDeniedError, isUuid } from '@custos/service-kit';
import { outbox } from '../db/schema.js';
import { MAX_RULES_PER_ORG, type IpRuleRecord, ipRuleView, parseIpRuleInput } from './ip-rule-fns.js';
import type { IpRuleStore } from './ip-rule-store.js';

/**
 * IP allow/block rules of an org (SPEC §2.5, §4.7). Managing them is for the org's human owners
 * and admins; each change writes its audit record in the same transaction. The gateway reads an
 * org's rules through `orgRules` and enforces them (SPEC §7, IP filter).
 */
export class IpRuleService {
  constructor(private readonly store: IpRuleStore) {}

  private manage(p: Principal): UserPrincipal {
    if (p.kind !== 'user') throw new PermissionDeniedError('agents may not manage IP rules');
    if (p.role !== 'owner' && p.role !== 'admin') {
      throw new PermissionDeniedError('only an org owner or admin may manage IP rules');
    }
    return p;
  }

  /** The caller's org's rules, oldest first. */
  async list(p: Principal): Promise<IpRule[]> {
    const caller = this.manage(p);
    return (await this.store.listByOrg(caller.orgId)).map(ipRuleView);
  }

  /** Adds a rule; the same network with the same type twice is a 409, as is the org's 1001st rule. */
  async create(p: Principal, fields: Record<string, unknown>): Promise<IpRule> {
    const caller = this.manage(p);
    const input = parseIpRuleInput(fields);
    const rule = await this.store.transaction(async (tx) => {
      await this.store.lockOrg(caller.orgId, tx);
      if ((await this.store.countByOrg(caller.orgId, tx)) >= MAX_RULES_PER_ORG) {
        throw new ConflictError(`an org may have at most ${MAX_RULES_PER_ORG} IP rules`);
      }
      const row = await this.store.insert(
        { ...input, orgId: caller.orgId, createdBy: caller.userId, createdByType: 'user' },
        tx,
      );
      if (!row) throw new ConflictError(`a ${input.ruleType} rule for ${input.cidr} already exists`, 'cidr');
      await writeAudit(tx, outbox, auditOf(caller, 'ip_rule.created', row));
      return row;
    });
    return ipRuleView(rule);
  }

  /** Removes a rule of the caller's org; another org's rule or an unknown id is 404. */
  async delete(p: Principal, ruleId: string): Promise<void> {
    const caller = this.manage(p);
    if (!isUuid(ruleId)) throw new NotFoundError('IP rule', ruleId.slice(0, 64));
    await this.store.transaction(async (tx) => {
      const row = await this.store.delete(caller.orgId, ruleId.toLowerCase(), tx);
      if (!row) throw new NotFoundError('IP rule', ruleId);
      await writeAudit(tx, outbox, auditOf(caller, 'ip_rule.deleted', row));
    });
  }

  /** Every rule of the caller's org, for the gateway's IP filter: any principal of the org may ask. */
  async orgRules(p: Principal): Promise<IpRule[]> {
    return (await this.store.listByOrg(p.orgId)).map(ipRuleView);
  }
}

function auditOf(caller: UserPrincipal, action: string, r: IpRuleRecord) {
  return {
    orgId: r.orgId,
    actorType: 'user' as const,
    actorId: caller.userId,
    action,
    resourceType: 'ip_rule',
    resourceId: r.id,
    metadata: { cidr: r.cidr, rule_type: r.ruleType },
  };
}
