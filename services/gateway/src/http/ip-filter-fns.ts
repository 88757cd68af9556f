import net from 'node:net';

// The policy service validates and normalises a rule's CIDR when it is created (its cidr-fns);
// the gateway only needs to read the stored form and compare client addresses against it.

/** An address as bytes: 4 for IPv4, 16 for IPv6; an IPv4-mapped IPv6 address is its IPv4 address. */
export function ipBytes(raw: string): Uint8Array | undefined {
  if (net.isIPv4(raw)) return Uint8Array.from(raw.split('.').map(Number));
  if (!net.isIPv6(raw) || raw.includes('%')) return undefined;
  let text = raw.toLowerCase();
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    // An embedded IPv4 tail (`::ffff:10.0.0.1`) is two groups.
    const v4 = ipBytes(last);
    if (!v4 || v4.length !== 4) return undefined;
    text = `${text.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = rest ? rest.split(':') : [];
  const zeros = rest !== undefined ? Math.max(8 - h.length - t.length, 0) : 0;
  const groups = [...h, ...Array<string>(zeros).fill('0'), ...t].map((g) => parseInt(g, 16));
  if (groups.length !== 8 || groups.some((g) => !(g >= 0 && g <= 0xffff))) return undefined;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  const mapped = out.subarray(0, 10).every((b) => b === 0) && out[10] === 0xff && out[11] === 0xff;
  return mapped ? out.slice(12) : out;
}

/** A rule the filter can match: its network as bytes and prefix. */
export interface CompiledRule {
  id: string;
  ruleType: 'allow' | 'block';
  bytes: Uint8Array;
  prefix: number;
}

/** A stored rule (`id`, `cidr`, `ruleType`) ready for matching; undefined when its CIDR cannot be read. */
export function compileRule(r: { id: string; cidr: string; ruleType: string }): CompiledRule | undefined {
  // The stored form always has a prefix; a missing one must not read as /0 (everything).
  const [address = '', prefixText = '', extra] = r.cidr.split('/');
  const bytes = ipBytes(address);
  if (!bytes || extra !== undefined || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bytes.length * 8) return undefined;
  if (r.ruleType !== 'allow' && r.ruleType !== 'block') return undefined;
  return { id: r.id, ruleType: r.ruleType, bytes, prefix };
}

/** Whether the address (as bytes) lies in the rule's network; IPv4 and IPv6 never match each other. */
export function ruleMatches(rule: CompiledRule, ip: Uint8Array): boolean {
  if (ip.length !== rule.bytes.length) return false;
  const full = Math.floor(rule.prefix / 8);
  for (let i = 0; i < full; i++) if (ip[i] !== rule.bytes[i]) return false;
  const bits = rule.prefix % 8;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return (ip[full]! & mask) === (rule.bytes[full]! & mask);
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
  const ip = ipBytes(clientIp);
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
