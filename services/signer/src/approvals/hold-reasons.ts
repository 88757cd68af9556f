import type { RuleMatch } from '@custos/approval-rules';
import type { Verdict } from '@custos/guardrails';
import { guardrailApprovalMatch } from '../guardrails/guardrails.js';
import { type ScreenResult, sanctionsApprovalMatch } from '../screening/sanctions-screen.js';
import type { TxRecord } from '../transactions/tx-types.js';

// Why a transaction is held for a human beyond its approval rules (issue 20): a sanctions hit under
// `address_screening_policy.mode: approve`, guardrail violations under `enforcement: approve`. The
// match asks the stricter of everything that applies; what was shown is kept on the held row
// (`held_sanctions_address`, `held_guardrail_codes` in its details) for the resume to check.

/** The guardrail reason codes a held transaction was approved with (none when held for rules only). */
export function approvedCodesOf(row: TxRecord | undefined): string[] {
  const codes = row?.details['held_guardrail_codes'];
  return codes ? codes.split(',').filter(Boolean) : [];
}

/**
 * A sanctions hit on top of whatever rule matched: the rule's consensus requirement and expiry are
 * kept (a hit never asks for fewer humans), at tier 3, the hit shown to the approver.
 */
export function withSanctionsHit(match: RuleMatch | undefined, hit: ScreenResult & { hit: true }): RuleMatch {
  const s = sanctionsApprovalMatch(hit);
  if (!match) return s;
  return { ...atTier(match, 3), ruleJson: { ...match.ruleJson, sanctions_hit: s.ruleJson } };
}

/**
 * A match raised to `tier`: its consensus requirement kept, less the credential types a vote cannot
 * prove at that tier (tier 3 votes are TOTP codes), so the approval can still be decided.
 */
export function atTier(match: RuleMatch, tier: RuleMatch['tier']): RuleMatch {
  if (tier <= match.tier) return match;
  const r = match.requirement;
  if (!r || r.requireCredentialTypes.length === 0) return { ...match, tier };
  const votable =
    tier === 3 ? r.requireCredentialTypes.filter((t) => t === 'totp') : r.requireCredentialTypes;
  return { ...match, tier, requirement: { ...r, requireCredentialTypes: votable } };
}

/** Guardrail violations under `approve` on top of whatever matched: the stricter of both is asked. */
export function withGuardrailViolations(match: RuleMatch | undefined, v: Verdict[]): RuleMatch {
  const g = guardrailApprovalMatch(v);
  if (!match) return g;
  return {
    ...atTier(match, Math.max(match.tier, g.tier) as RuleMatch['tier']),
    ruleJson: { ...match.ruleJson, guardrail_violations: g.ruleJson['violations'] },
  };
}
