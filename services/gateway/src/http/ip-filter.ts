import type { RequestHandler } from 'express';
import { AuditServiceClient } from '@custos/proto/custos/audit/v1/service';
import type { IpRule } from '@custos/proto/custos/policy/v1/messages';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import {
  ExpiringLru,
  type Logger,
  PermissionDeniedError,
  describeError,
  unaryCaller,
} from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type CompiledRule, type IpVerdict, compileRule, ipVerdict } from './ip-filter-fns.js';

/** How many orgs' rules the gateway keeps at most. */
export const IP_RULES_CACHE_MAX_ORGS = 10_000;

/**
 * Each org's IP rules, cached for `ttlMs` in a bounded LRU so a request does not cost a call to
 * the policy service. Concurrent misses of one org share one call. `fetch` runs in the request's
 * context, so the policy service answers for the caller's own org.
 */
export class IpRuleCache {
  private readonly lru = new ExpiringLru<readonly CompiledRule[]>(IP_RULES_CACHE_MAX_ORGS);
  private readonly inFlight = new Map<string, Promise<readonly CompiledRule[]>>();
  // Bumped by invalidate, so a fetch that started before a change does not cache the old rules.
  private readonly generation = new Map<string, number>();

  constructor(
    private readonly fetch: () => Promise<IpRule[]>,
    private readonly ttlMs: number,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The org's rules (the caller must belong to the org). */
  async rules(orgId: string): Promise<readonly CompiledRule[]> {
    const hit = this.lru.get(orgId, this.clock());
    if (hit) return hit;
    let pending = this.inFlight.get(orgId);
    if (!pending) {
      const gen = this.generation.get(orgId) ?? 0;
      const p = this.load(orgId, gen).finally(() => {
        // An invalidate may have started a newer call meanwhile; leave that one in place.
        if (this.inFlight.get(orgId) === p) this.inFlight.delete(orgId);
      });
      this.inFlight.set(orgId, p);
      pending = p;
    }
    return pending;
  }

  private async load(orgId: string, gen: number): Promise<readonly CompiledRule[]> {
    const compiled: CompiledRule[] = [];
    for (const r of await this.fetch()) {
      const c = compileRule(r);
      if (c) compiled.push(c);
      // A stored rule the gateway cannot read would silently weaken the filter; say so.
      else this.logger.error({ ruleId: r.id, orgId }, 'IP rule with an unreadable cidr ignored');
    }
    if ((this.generation.get(orgId) ?? 0) === gen) this.lru.set(orgId, compiled, this.clock() + this.ttlMs);
    return compiled;
  }

  /** Forgets the org's rules, after this gateway changed them (other replicas follow within the TTL). */
  invalidate(orgId: string): void {
    this.lru.delete(orgId);
    this.inFlight.delete(orgId);
    this.generation.set(orgId, (this.generation.get(orgId) ?? 0) + 1);
    if (this.generation.size > IP_RULES_CACHE_MAX_ORGS) this.generation.clear();
  }
}

/** Records a refusal in the audit log; a failure is logged, never turned into the response. */
export type DenialAudit = (denial: {
  method: string;
  path: string;
  verdict: Exclude<IpVerdict, { allowed: true }>;
}) => Promise<void>;

/**
 * SPEC §7 IP filter, after authentication: refuses (403 `ip_denied`) a client the caller's org's
 * IP rules do not admit, and audits `ip_rule.denied`. Public routes never reach it.
 */
export function ipFilter(deps: { cache: IpRuleCache; audit: DenialAudit; logger: Logger }): RequestHandler {
  return (req, _res, next) => {
    const principal = req.principal;
    if (!principal) return next();
    deps.cache.rules(principal.orgId).then(async (rules) => {
      const verdict = ipVerdict(rules, req.clientIp);
      if (verdict.allowed) return next();
      try {
        await deps.audit({ method: req.method, path: req.path, verdict });
      } catch (err) {
        deps.logger.warn({ err: describeError(err) }, 'could not audit an IP-rule refusal');
      }
      next(
        new PermissionDeniedError(
          `requests from ${req.clientIp || 'this address'} are not allowed for this org`,
          {
            type: 'ip_denied',
          },
        ),
      );
    }, next);
  };
}

/** The IP filter stage wired to its peers: rules from policy, refusals to audit. */
export function connectIpFilter(
  peers: Peers,
  ttlMs: number,
  logger: Logger,
): { filter: RequestHandler; cache: IpRuleCache } {
  const policy = peers.client(PolicyServiceClient, 'policy');
  const audit = peers.client(AuditServiceClient, 'audit');
  const callPolicy = unaryCaller(policy);
  const callAudit = unaryCaller(audit);
  const cache = new IpRuleCache(
    async () => (await callPolicy(policy.getOrgIpRules, {})).rules,
    ttlMs,
    logger,
  );
  const record: DenialAudit = async ({ method, path, verdict }) => {
    // The audit service takes the actor and org from the forwarded JWT and the client address
    // from the request context.
    await callAudit(audit.recordEvent, {
      action: 'ip_rule.denied',
      resourceType: 'route',
      resourceId: `${method} ${path}`,
      metadata: {
        method,
        path,
        reason: verdict.reason,
        ...(verdict.reason === 'blocked' ? { rule_id: verdict.ruleId } : {}),
      },
    });
  };
  return { filter: ipFilter({ cache, audit: record, logger }), cache };
}
