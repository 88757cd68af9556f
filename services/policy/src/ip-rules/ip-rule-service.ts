import { type OrgAdmin, type Principal, requireHumanAdmin } from '@custos/auth';
import { ConflictError, NotFoundError, isUuid } from '@custos/service-kit';
import { ipRuleAudit, writePolicyAudit } from '../audit/policy-audit.js';
import { MAX_RULES_PER_ORG, checkIpRuleInput } from './ip-rule-fns.js';
import type { IpRuleStore } from './ip-rule-store.js';
import type { IpRuleRecord, IpRuleRequest } from './ip-rule-types.js';

/**
 * IP allow/block rules of an org (SPEC §2.5, §4.7). Managing them is for the org's human owners
 * and admins; each change writes its audit record in the same transaction. The gateway reads an
 * org's rules through `orgRules` and enforces them (SPEC §7, IP filter).
 */
export class IpRuleService {
  constructor(private readonly store: IpRuleStore) {}

  private manage(p: Principal): OrgAdmin {
    requireHumanAdmin(p, 'manage IP rules');
    return p;
  }

  /** The caller's org's rules, oldest first. */
  async list(p: Principal): Promise<IpRuleRecord[]> {
    const caller = this.manage(p);
    return this.store.listByOrg(caller.orgId);
  }

  /** Adds a rule; the same network with the same type twice is a 409, as is the org's 1001st rule. */
  async create(p: Principal, request: IpRuleRequest): Promise<IpRuleRecord> {
    const caller = this.manage(p);
    const input = checkIpRuleInput(request);
    return this.store.transaction(async (tx) => {
      await this.store.lockOrg(caller.orgId, tx);
      if ((await this.store.countByOrg(caller.orgId, tx)) >= MAX_RULES_PER_ORG) {
        throw new ConflictError(`an org may have at most ${MAX_RULES_PER_ORG} IP rules`);
      }
      const row = await this.store.insert(
        { ...input, orgId: caller.orgId, createdBy: caller.userId, createdByType: 'user' },
        tx,
      );
      if (!row) throw new ConflictError(`a ${input.ruleType} rule for ${input.cidr} already exists`, 'cidr');
      await writePolicyAudit(tx, ipRuleAudit(caller, 'ip_rule.created', row));
      return row;
    });
  }

  /** Removes a rule of the caller's org; another org's rule or an unknown id is 404. */
  async delete(p: Principal, ruleId: string): Promise<void> {
    const caller = this.manage(p);
    if (!isUuid(ruleId)) throw new NotFoundError('IP rule', ruleId.slice(0, 64));
    await this.store.transaction(async (tx) => {
      const row = await this.store.delete(caller.orgId, ruleId.toLowerCase(), tx);
      if (!row) throw new NotFoundError('IP rule', ruleId);
      await writePolicyAudit(tx, ipRuleAudit(caller, 'ip_rule.deleted', row));
    });
  }

  /** Every rule of the caller's org, for the gateway's IP filter: any principal of the org may ask. */
  async orgRules(p: Principal): Promise<IpRuleRecord[]> {
    return this.store.listByOrg(p.orgId);
  }
}
