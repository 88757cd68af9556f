import fc from 'fast-check';
import { pathMatches } from '@custos/auth';
import { agentScopes, decide } from './decide-fns';
import type { Decision, DecisionRequest, Grant, Permission } from './grant-types';

// A small, obviously correct reference model of globs and of Policy Engine v2, checked against the
// real implementation on random inputs.

/** Glob match by direct recursion on the definition: `*` one segment, `**` zero or more. */
function refMatch(pat: readonly string[], segs: readonly string[]): boolean {
  if (pat.length === 0) return segs.length === 0;
  const [p, ...rest] = pat;
  if (p === '**') return refMatch(rest, segs) || (segs.length > 0 && refMatch(pat, segs.slice(1)));
  if (segs.length === 0) return false;
  return (p === '*' || p === segs[0]) && refMatch(rest, segs.slice(1));
}

const segment = fc.constantFrom('a', 'b', 'c');
const patternSegment = fc.constantFrom('a', 'b', '*', '**');
const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => s.join('/'));
const pattern = fc.array(patternSegment, { minLength: 1, maxLength: 5 }).map((s) => s.join('/'));

describe('glob matching (property)', () => {
  it('agrees with the recursive definition', () => {
    fc.assert(
      fc.property(pattern, path, (p, s) => pathMatches(p, s) === refMatch(p.split('/'), s.split('/'))),
      { numRuns: 5000 },
    );
  });
  it('** matches everything, a literal path only itself', () => {
    fc.assert(fc.property(path, path, (a, b) => pathMatches('**', a) && pathMatches(a, b) === (a === b)));
  });
});

const NOW = new Date('2030-01-07T12:00:00Z');
// Reference CIDRs, as prefixes a reader can check by eye.
const CIDR_PREFIX: Record<string, string> = { '10.0.0.0/8': '10.', '192.168.0.0/16': '192.168.' };

const grantArb = fc.record({
  vaultId: fc.constantFrom('v1', 'v2'),
  principalType: fc.constantFrom('user' as const, 'agent' as const),
  principalId: fc.constantFrom('p1', 'p2'),
  secretPathPattern: pattern,
  permissions: fc.subarray<Permission>(['read', 'write'], { minLength: 1 }),
  effect: fc.constantFrom('allow' as const, 'deny' as const),
  priority: fc.integer({ min: 0, max: 3 }),
  expiresInMs: fc.option(fc.integer({ min: -2000, max: 2000 }), { nil: null }),
  createdAtMs: fc.integer({ min: 0, max: 5 }),
  ipCidrs: fc.option(fc.subarray(Object.keys(CIDR_PREFIX), { minLength: 1 }), { nil: undefined }),
  environmentIn: fc.option(fc.subarray(['production', 'preview'], { minLength: 1 }), { nil: undefined }),
});

const grantsArb = fc.array(grantArb, { maxLength: 8 }).map((gs) =>
  gs.map(
    (g, i): Grant => ({
      id: `g${i}`,
      vaultId: g.vaultId,
      principalType: g.principalType,
      principalId: g.principalId,
      secretPathPattern: g.secretPathPattern,
      permissions: g.permissions,
      conditions: {
        ...(g.ipCidrs ? { ipCidrs: g.ipCidrs } : {}),
        ...(g.environmentIn ? { environmentIn: g.environmentIn } : {}),
      },
      effect: g.effect,
      priority: g.priority,
      expiresAt: g.expiresInMs === null ? null : new Date(NOW.getTime() + g.expiresInMs),
      createdAt: new Date(NOW.getTime() - 10_000 + g.createdAtMs),
    }),
  ),
);

const requestArb = fc.record({
  principalType: fc.constantFrom('user' as const, 'agent' as const),
  principalId: fc.constantFrom('p1', 'p2'),
  principalOrgId: fc.constantFrom('o1', 'o1', 'o1', 'o2'),
  environment: fc.option(fc.constantFrom('production', 'preview'), { nil: undefined }),
  clientIp: fc.option(fc.constantFrom('10.1.2.3', '192.168.7.7', '172.16.0.1'), { nil: undefined }),
  vaultId: fc.constantFrom('v1', 'v2'),
  vaultOrgId: fc.constant('o1'),
  path,
  permission: fc.constantFrom<Permission>('read', 'write'),
  now: fc.constant(NOW),
}) as fc.Arbitrary<DecisionRequest>;

function byAge(a: Grant, b: Grant): number {
  return a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function refDecide(grants: readonly Grant[], r: DecisionRequest): Omit<Decision, 'cacheableForMs'> {
  if (r.principalOrgId !== r.vaultOrgId) return { allowed: false, policyId: '', reason: 'other_org' };
  const applicable = grants.filter(
    (g) =>
      g.principalType === r.principalType &&
      g.principalId === r.principalId &&
      g.vaultId === r.vaultId &&
      (g.expiresAt === null || g.expiresAt > r.now) &&
      g.permissions.includes(r.permission) &&
      refMatch(g.secretPathPattern.split('/'), r.path.split('/')) &&
      (!g.conditions.ipCidrs ||
        g.conditions.ipCidrs.some(
          (c) => r.clientIp !== undefined && r.clientIp.startsWith(CIDR_PREFIX[c]!),
        )) &&
      (!g.conditions.environmentIn ||
        (r.environment !== undefined && g.conditions.environmentIn.includes(r.environment))),
  );
  if (applicable.length === 0) return { allowed: false, policyId: '', reason: 'no_match' };
  const top = Math.max(...applicable.map((g) => g.priority));
  const tops = applicable.filter((g) => g.priority === top);
  const denies = tops.filter((g) => g.effect === 'deny').sort(byAge);
  if (denies.length > 0) return { allowed: false, policyId: denies[0]!.id, reason: 'deny' };
  return { allowed: true, policyId: [...tops].sort(byAge)[0]!.id, reason: 'allow' };
}

describe('decide (property)', () => {
  it('gives a cacheable answer to the same question from any client address at any time inside its window', () => {
    fc.assert(
      fc.property(
        grantsArb,
        requestArb,
        fc.constantFrom('10.0.0.1', '192.168.1.9', '2001:db8::1', undefined),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (grants, r, otherIp, f) => {
          const first = decide(grants, r);
          if (first.cacheableForMs === 0) return;
          const later = new Date(r.now.getTime() + Math.floor(f * (first.cacheableForMs - 1)));
          const again = decide(grants, { ...r, clientIp: otherIp, now: later });
          expect(again.allowed).toBe(first.allowed);
          expect(again.policyId).toBe(first.policyId);
        },
      ),
      { numRuns: 3000 },
    );
  });
  it('agrees with the reference model', () => {
    fc.assert(
      fc.property(grantsArb, requestArb, (grants, r) => {
        const { cacheableForMs: _cacheable, ...decision } = decide(grants, r);
        expect(decision).toEqual(refDecide(grants, r));
      }),
      { numRuns: 5000 },
    );
  });
  it('does not depend on the order grants are read in', () => {
    fc.assert(
      fc.property(grantsArb, requestArb, (grants, r) => {
        expect(decide([...grants].reverse(), r)).toEqual(decide(grants, r));
      }),
    );
  });
  it('never allows when a deny applies at the top priority', () => {
    fc.assert(
      fc.property(grantsArb, requestArb, (grants, r) => {
        const top = Math.max(...grants.map((g) => g.priority), 0) + 1;
        const deny: Grant = {
          id: 'zz',
          vaultId: r.vaultId,
          principalType: r.principalType,
          principalId: r.principalId,
          secretPathPattern: '**',
          permissions: ['read', 'write'],
          conditions: {},
          effect: 'deny',
          priority: top,
          expiresAt: null,
          createdAt: NOW,
        };
        expect(decide([...grants, deny], r).allowed).toBe(false);
      }),
    );
  });
  it('lists as scopes exactly the distinct patterns of live allow grants, oldest first', () => {
    fc.assert(
      fc.property(grantsArb, (grants) => {
        const live = grants
          .filter((g) => g.effect === 'allow' && (g.expiresAt === null || g.expiresAt > NOW))
          .sort(byAge);
        const scopes: string[] = [];
        for (const g of live) if (!scopes.includes(g.secretPathPattern)) scopes.push(g.secretPathPattern);
        expect(agentScopes(grants, NOW).scopes).toEqual(scopes);
      }),
    );
  });
});
