import { InvalidArgumentError, normalizeCidr } from '@custos/service-kit';
import type { IpRule } from '@custos/proto/custos/policy/v1/messages';

/** The kinds of IP rule (SPEC §2.5). */
export const RULE_TYPES = ['allow', 'block'] as const;
/** `allow` or `block`. */
export type RuleType = (typeof RULE_TYPES)[number];

/** The longest `description` accepted, in characters. */
export const MAX_DESCRIPTION = 1000;
/** How many rules one org may hold (the gateway holds them all in memory per org). */
export const MAX_RULES_PER_ORG = 1000;
// Longer than any IPv6 CIDR text; anything longer is refused before it is parsed.
const MAX_CIDR_TEXT = 64;

const FIELDS = new Set(['cidr', 'rule_type', 'description']);

/** A validated new rule. */
export interface IpRuleInput {
  cidr: string;
  ruleType: RuleType;
  description: string;
}

/** A stored rule. */
export interface IpRuleRecord extends IpRuleInput {
  id: string;
  orgId: string;
  createdBy: string;
  createdByType: 'user' | 'agent';
  createdAt: Date;
}

/**
 * The rule type: `allow` or `block`. `deny` (the 0.53 reference's name) is read as `block`, so
 * older clients keep working; the rule is stored and returned as `block`.
 */
export function ruleType(v: unknown): RuleType {
  if (v === 'allow' || v === 'block') return v;
  if (v === 'deny') return 'block';
  throw new InvalidArgumentError('rule_type', 'rule_type is required and must be allow or block');
}

/** An IPv4 or IPv6 address or CIDR, normalised (see normalizeCidr). */
export function cidr(v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) {
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

function description(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InvalidArgumentError('description', 'description must be a string');
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

/** Validates the body of a new rule, naming the first field it refuses (unknown fields too). */
export function parseIpRuleInput(fields: Record<string, unknown>): IpRuleInput {
  for (const k of Object.keys(fields)) {
    if (!FIELDS.has(k)) {
      throw new InvalidArgumentError(k, `${k} is not a field of an IP rule (cidr, rule_type, description)`);
    }
  }
  return {
    cidr: cidr(fields['cidr']),
    ruleType: ruleType(fields['rule_type']),
    description: description(fields['description']),
  };
}

/** The rule as gRPC (and HTTP) returns it. */
export function ipRuleView(r: IpRuleRecord): IpRule {
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
