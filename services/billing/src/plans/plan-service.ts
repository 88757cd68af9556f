import type { Principal } from '@custos/auth';
import { InvalidArgumentError, NotFoundError, PermissionDeniedError, isUuid } from '@custos/service-kit';
import { isPlan, orgPlanOf } from './plan-fns.js';
import type { PlanStore } from './plan-store.js';
import type { OrgPlan, Plan } from './plan-types.js';

/**
 * Plans and tier caps. Services that own vaults, secrets and agents ask for an org's caps and
 * enforce them in their own database; only a platform admin changes an org's plan.
 */
export class PlanService {
  constructor(
    private readonly store: Pick<PlanStore, 'planOf' | 'assign'>,
    private readonly defaultPlan: Plan,
  ) {}

  /**
   * The caps of `orgId`, or of the caller's org when it is empty. A caller may read its own org's
   * caps; a platform admin any org's; a peer service (no caller) any org's.
   */
  async limits(caller: Principal | undefined, orgId: string): Promise<OrgPlan> {
    const org = orgId || caller?.orgId;
    if (!org) throw new InvalidArgumentError('org_id', 'is required');
    if (!isUuid(org)) throw new InvalidArgumentError('org_id', 'must be a UUID');
    if (caller && caller.orgId !== org && !(caller.kind === 'user' && caller.platformAdmin)) {
      throw new NotFoundError('org', org);
    }
    return orgPlanOf((await this.store.planOf(org)) ?? this.defaultPlan);
  }

  /** Assigns a plan; platform admins only. */
  async assign(caller: Principal, orgId: string, plan: string): Promise<OrgPlan> {
    if (caller.kind !== 'user' || !caller.platformAdmin) {
      throw new PermissionDeniedError('only a platform admin may change an org plan');
    }
    if (!isUuid(orgId)) throw new InvalidArgumentError('org_id', 'must be a UUID');
    if (!isPlan(plan))
      throw new InvalidArgumentError('plan', 'must be one of free, pro, business, enterprise');
    await this.store.assign(orgId, plan, caller.userId);
    return orgPlanOf(plan);
  }
}
