import type {
  DecisionPrincipal as DecisionPrincipalMessage,
  GrantChange,
  GrantConditions,
  GrantInput,
  IpRule,
  Policy,
  VaultFacts as VaultFactsMessage,
} from '@custos/proto/custos/policy/v1/messages';
import { storedRuleMessage, storedRuleOf } from '@custos/approval-rules';
import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import type {
  Conditions,
  DecisionPrincipal,
  GrantChangeRequest,
  GrantRecord,
  GrantRequest,
  VaultFacts,
} from '../grants/grant-types.js';
import type { IpRuleRecord } from '../ip-rules/ip-rule-types.js';

// Mapping between the PolicyService messages and the domain's types. In a message an empty list
// means "absent" (no valid list is empty), and a missing sub-message means "not given".

const nonEmpty = (l: readonly string[]) => (l.length > 0 ? [...l] : undefined);

/** The principal of a DecideRequest (verified by the asking service) as the rules read it. */
export function decisionPrincipalOf(m: DecisionPrincipalMessage | undefined): DecisionPrincipal {
  if (!m || !isUuid(m.id) || !isUuid(m.orgId)) {
    throw new InvalidArgumentError('principal', 'principal must name a user or agent and its org (UUIDs)');
  }
  const id = m.id.toLowerCase();
  const orgId = m.orgId.toLowerCase();
  if (m.type === 'user') return { kind: 'user', userId: id, orgId };
  if (m.type === 'agent') {
    return { kind: 'agent', agentId: id, orgId, ...(m.environment ? { environment: m.environment } : {}) };
  }
  throw new InvalidArgumentError('principal', 'principal type must be user or agent');
}

/** A conditions message as the domain reads it. */
export function conditionsOf(m: GrantConditions): Conditions {
  const ipCidrs = nonEmpty(m.ipCidrs);
  const environmentIn = nonEmpty(m.environmentIn);
  const w = m.timeWindow;
  const days = w ? nonEmpty(w.days) : undefined;
  return {
    ...(ipCidrs ? { ipCidrs } : {}),
    ...(w
      ? {
          timeWindow: {
            start: w.start,
            end: w.end,
            ...(w.timezone !== undefined ? { timezone: w.timezone } : {}),
            ...(days ? { days } : {}),
          },
        }
      : {}),
    ...(environmentIn ? { environmentIn } : {}),
  };
}

function conditionsMessage(c: Conditions): GrantConditions {
  return {
    ipCidrs: c.ipCidrs ?? [],
    ...(c.timeWindow
      ? {
          timeWindow: {
            start: c.timeWindow.start,
            end: c.timeWindow.end,
            ...(c.timeWindow.timezone !== undefined ? { timezone: c.timeWindow.timezone } : {}),
            days: c.timeWindow.days ?? [],
          },
        }
      : {}),
    environmentIn: c.environmentIn ?? [],
  };
}

/** The vault facts of a request; a request without them names no vault it may act on. */
export function vaultFactsOf(vaultId: string, m: VaultFactsMessage | undefined): VaultFacts {
  if (!m) throw new InvalidArgumentError('vault', 'vault facts (who owns the vault) are required');
  return {
    vaultId: vaultId.toLowerCase(),
    orgId: m.orgId.toLowerCase(),
    createdBy: m.createdBy.toLowerCase(),
    createdByType: m.createdByType,
    isSystem: m.isSystem,
  };
}

/** A new grant as the domain reads it. */
export function grantRequestOf(m: GrantInput | undefined): GrantRequest {
  if (!m) throw new InvalidArgumentError('grant', 'grant is required');
  return {
    secretPathPattern: m.secretPathPattern,
    principalType: m.principalType,
    principalId: m.principalId,
    permissions: m.permissions,
    ...(m.conditions ? { conditions: conditionsOf(m.conditions) } : {}),
    effect: m.effect,
    priority: m.priority,
    expiresAt: m.expiresAt,
    ...(m.consensusTrigger ? { consensusTrigger: storedRuleOf(m.consensusTrigger) } : {}),
  };
}

/** A partial update as the domain reads it. */
export function grantChangeOf(m: GrantChange | undefined): GrantChangeRequest {
  if (!m) return { cleared: [] };
  return {
    secretPathPattern: m.secretPathPattern,
    permissions: nonEmpty(m.permissions),
    ...(m.conditions ? { conditions: conditionsOf(m.conditions) } : {}),
    effect: m.effect,
    priority: m.priority,
    expiresAt: m.expiresAt,
    ...(m.consensusTrigger ? { consensusTrigger: storedRuleOf(m.consensusTrigger) } : {}),
    cleared: m.clearedFields,
  };
}

/** A stored grant as the Policy message carries it. */
export function policyMessage(g: GrantRecord): Policy {
  return {
    id: g.id,
    vaultId: g.vaultId,
    secretPathPattern: g.secretPathPattern,
    principalType: g.principalType,
    principalId: g.principalId,
    permissions: [...g.permissions],
    conditions: conditionsMessage(g.conditions),
    effect: g.effect,
    priority: g.priority,
    ...(g.expiresAt ? { expiresAt: g.expiresAt.toISOString() } : {}),
    ...(g.consensusTrigger ? { consensusTrigger: storedRuleMessage(g.consensusTrigger) } : {}),
    createdBy: g.createdBy,
    // Only people manage grants (GrantService refuses agents).
    createdByType: 'user',
    createdAt: g.createdAt.toISOString(),
    updatedAt: g.updatedAt.toISOString(),
  };
}

/** A stored IP rule as the IpRule message carries it. */
export function ipRuleMessage(r: IpRuleRecord): IpRule {
  return {
    id: r.id,
    orgId: r.orgId,
    cidr: r.cidr,
    ruleType: r.ruleType,
    description: r.description,
    createdBy: r.createdBy,
    createdByType: r.createdByType,
    createdAt: r.createdAt.toISOString(),
  };
}
