import { InvalidArgumentError, normalizeCidr } from '@custos/service-kit';
import type { IpRuleInput, IpRuleRequest, RuleType } from './ip-rule-types.js';

/** The longest `description` accepted, in characters. */
export const MAX_DESCRIPTION = 1000;
/** How many rules one org may hold (the gateway holds them all in memory per org). */
export const MAX_RULES_PER_ORG = 1000;
// Longer than any IPv6 CIDR text; anything longer is refused before it is parsed.
const MAX_CIDR_TEXT = 64;

/** The rule type: `allow` or `block` (the gateway reads the 0.53 reference's `deny` as `block`). */
export function ruleType(v: string): RuleType {
  if (v === 'allow' || v === 'block') return v;
  throw new InvalidArgumentError('rule_type', 'rule_type is required and must be allow or block');
}

/** An IPv4 or IPv6 address or CIDR, normalised (see normalizeCidr). */
export function cidr(v: string): string {
  if (v.length === 0) {
    throw new InvalidArgumentError('cidr', 'cidr is required and must be an IPv4 or IPv6 CIDR');
  }
  const n = v.length <= MAX_CIDR_TEXT ? normalizeCidr(v.trim()) : undefined;
  if (!n) {
    throw new InvalidArgumentError(
      'cidr',
      `cidr "${v.slice(0, MAX_CIDR_TEXT)}" is not an IPv4 or IPv6 address or CIDR (e.g. 203.0.113.0/24, 2001:db8::/32)`,
    );
  }
  return n;
}

function description(v: string): string {
  if (v.length > MAX_DESCRIPTION) {
    throw new InvalidArgumentError(
      'description',
      `description must be at most ${MAX_DESCRIPTION} characters`,
    );
  }
  // Postgres text cannot hold NUL: refuse it here rather than fail the insert.
  if (v.includes('\u0000')) {
    throw new InvalidArgumentError('description', 'description must not contain NUL characters');
  }
  return v;
}

/** Checks a new rule, naming the first field it refuses, and normalises its network. */
export function checkIpRuleInput(r: IpRuleRequest): IpRuleInput {
  return { cidr: cidr(r.cidr), ruleType: ruleType(r.ruleType), description: description(r.description) };
}
