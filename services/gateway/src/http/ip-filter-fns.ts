import { type Network, parseIp, parseNetwork } from '@custos/service-kit';

// The policy service validates and normalises a rule's CIDR when it is created; the gateway reads
// the stored form with the same parser (service-kit's cidr) and compares client addresses to it.

/** A rule the filter can match: its network. */
export interface CompiledRule {
  id: string;
  ruleType: 'allow' | 'block';
  network: Network;
}

/** A stored rule (`id`, `cidr`, `ruleType`) ready for matching; undefined when its CIDR cannot be read. */
export function compileRule(r: { id: string; cidr: string; ruleType: string }): CompiledRule | undefined {
  // The stored form always has a prefix; one without is not a rule the policy service wrote.
  if (!r.cidr.includes('/')) return undefined;
  const network = parseNetwork(r.cidr);
  if (!network || (r.ruleType !== 'allow' && r.ruleType !== 'block')) return undefined;
  return { id: r.id, ruleType: r.ruleType, network };
}

/** Whether the address (as bytes) lies in the rule's network; IPv4 and IPv6 never match each other. */
export function ruleMatches(rule: CompiledRule, ip: Uint8Array): boolean {
  const { bytes, prefix } = rule.network;
  if (ip.length !== bytes.length) return false;
  const full = Math.floor(prefix / 8);
  for (let i = 0; i < full; i++) if (ip[i] !== bytes[i]) return false;
  const bits = prefix % 8;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return (ip[full]! & mask) === (bytes[full]! & mask);
}

/** What the IP filter decides about one client of one org. */
export type IpVerdict =
  | { allowed: true }
  | { allowed: false; reason: 'blocked'; ruleId: string }
  | { allowed: false; reason: 'not_allowed' };

/**
 * SPEC §7 IP filter: a block rule covering the client refuses it (naming the oldest such rule);
 * otherwise, when the org has any allow rule, only a client an allow rule covers passes. An
 * address that cannot be read matches no rule.
 */
export function ipVerdict(rules: readonly CompiledRule[], clientIp: string): IpVerdict {
  if (rules.length === 0) return { allowed: true };
  const ip = parseIp(clientIp)?.bytes;
  let anyAllow = false;
  let allowed = false;
  for (const r of rules) {
    const match = ip !== undefined && ruleMatches(r, ip);
    if (r.ruleType === 'block') {
      if (match) return { allowed: false, reason: 'blocked', ruleId: r.id };
    } else {
      anyAllow = true;
      allowed ||= match;
    }
  }
  return !anyAllow || allowed ? { allowed: true } : { allowed: false, reason: 'not_allowed' };
}
