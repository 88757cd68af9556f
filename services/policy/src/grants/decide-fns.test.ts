import { MAX_CACHEABLE_MS, agentScopes, cacheableForMs, decide } from './decide-fns';
import type { DecisionRequest, Grant } from './grant-types';

const NOW = new Date('2030-01-07T12:00:00Z');
const ORG = 'org-1';
const VAULT = 'vault-1';
const AGENT = 'agent-1';
let seq = 0;

function grant(patch: Partial<Grant> = {}): Grant {
  seq += 1;
  return {
    id: `g${String(seq).padStart(3, '0')}`,
    vaultId: VAULT,
    principalType: 'agent',
    principalId: AGENT,
    secretPathPattern: '**',
    permissions: ['read'],
    conditions: {},
    effect: 'allow',
    priority: 0,
    expiresAt: null,
    createdAt: new Date(NOW.getTime() - 100_000 + seq),
    ...patch,
  };
}

function request(patch: Partial<DecisionRequest> = {}): DecisionRequest {
  return {
    principalType: 'agent',
    principalId: AGENT,
    principalOrgId: ORG,
    environment: 'production',
    clientIp: '10.0.0.1',
    vaultId: VAULT,
    vaultOrgId: ORG,
    path: 'prod/db',
    permission: 'read',
    now: NOW,
    ...patch,
  };
}

describe('decide', () => {
  it('denies with no_match when no grant applies', () => {
    expect(decide([], request())).toEqual({
      allowed: false,
      policyId: '',
      reason: 'no_match',
      cacheableForMs: MAX_CACHEABLE_MS,
    });
    const others = [
      grant({ principalId: 'agent-2' }),
      grant({ principalType: 'user' }),
      grant({ vaultId: 'vault-2' }),
      grant({ permissions: ['write'] }),
      grant({ secretPathPattern: 'dev/*' }),
      grant({ expiresAt: NOW }),
      grant({ conditions: { ipCidrs: ['192.168.0.0/16'] } }),
      grant({ conditions: { environmentIn: ['preview'] } }),
    ];
    expect(decide(others, request())).toMatchObject({ allowed: false, reason: 'no_match' });
  });
  it('denies a principal of another org whatever its grants say', () => {
    expect(decide([grant()], request({ principalOrgId: 'org-2' }))).toEqual({
      allowed: false,
      policyId: '',
      reason: 'other_org',
      cacheableForMs: MAX_CACHEABLE_MS,
    });
  });
  it('allows with the matching grant', () => {
    const g = grant({ secretPathPattern: 'prod/*', conditions: { ipCidrs: ['10.0.0.0/8'] } });
    expect(decide([g], request())).toEqual({
      allowed: true,
      policyId: g.id,
      reason: 'allow',
      cacheableForMs: 0, // an IP condition: asked each time,
    });
  });
  it('lets deny win at equal priority, and a higher priority win over either', () => {
    const allow = grant({ priority: 5 });
    const deny = grant({ priority: 5, effect: 'deny' });
    expect(decide([allow, deny], request())).toEqual({
      allowed: false,
      policyId: deny.id,
      reason: 'deny',
      cacheableForMs: MAX_CACHEABLE_MS,
    });
    expect(decide([deny, allow], request())).toMatchObject({ policyId: deny.id });
    const higher = grant({ priority: 6 });
    expect(decide([deny, higher, allow], request())).toEqual({
      allowed: true,
      policyId: higher.id,
      reason: 'allow',
      cacheableForMs: MAX_CACHEABLE_MS,
    });
    const lowDeny = grant({ priority: 1, effect: 'deny' });
    expect(decide([lowDeny, allow], request())).toMatchObject({ allowed: true, policyId: allow.id });
  });
  it('names the oldest of equal winners', () => {
    const a = grant();
    const b = grant();
    expect(decide([b, a], request()).policyId).toBe(a.id);
  });
  it('ignores an expired deny and a deny whose conditions do not hold', () => {
    const allow = grant();
    const expired = grant({ effect: 'deny', expiresAt: new Date(NOW.getTime() - 1) });
    const elsewhere = grant({ effect: 'deny', conditions: { ipCidrs: ['192.168.0.0/16'] } });
    expect(decide([allow, expired, elsewhere], request())).toMatchObject({
      allowed: true,
      policyId: allow.id,
    });
  });
});

describe('agentScopes', () => {
  it('lists distinct patterns and vaults of live allow grants in creation order', () => {
    const grants = [
      grant({ secretPathPattern: 'b/*', vaultId: 'v2' }),
      grant({ secretPathPattern: 'a/*', vaultId: 'v1' }),
      grant({ secretPathPattern: 'b/*', vaultId: 'v1' }),
      grant({ secretPathPattern: 'deny/*', effect: 'deny', vaultId: 'v3' }),
      grant({ secretPathPattern: 'old/*', expiresAt: new Date(NOW.getTime() - 1), vaultId: 'v4' }),
    ];
    expect(agentScopes([...grants].reverse(), NOW)).toEqual({
      scopes: ['b/*', 'a/*'],
      vaultIds: ['v2', 'v1'],
    });
    expect(agentScopes([], NOW)).toEqual({ scopes: [], vaultIds: [] });
  });
});

describe('cacheableForMs', () => {
  it('is a day for unconditional grants that never expire, and for none', () => {
    expect(cacheableForMs([], NOW)).toBe(MAX_CACHEABLE_MS);
    expect(cacheableForMs([grant(), grant({ effect: 'deny' })], NOW)).toBe(MAX_CACHEABLE_MS);
  });
  it('is 0 when any grant has an IP or a time-window condition, whichever grant it is', () => {
    expect(cacheableForMs([grant(), grant({ conditions: { ipCidrs: ['10.0.0.0/8'] } })], NOW)).toBe(0);
    expect(
      cacheableForMs([grant({ conditions: { timeWindow: { start: '09:00', end: '17:00' } } })], NOW),
    ).toBe(0);
  });
  it('ends when the first grant expires (an expiry can turn the answer either way)', () => {
    const soon = grant({ expiresAt: new Date(NOW.getTime() + 1500) });
    const later = grant({ effect: 'deny', expiresAt: new Date(NOW.getTime() + 9000) });
    expect(cacheableForMs([later, soon], NOW)).toBe(1500);
  });
  it('does not mind an environment condition: the environment is part of the question', () => {
    expect(cacheableForMs([grant({ conditions: { environmentIn: ['production'] } })], NOW)).toBe(
      MAX_CACHEABLE_MS,
    );
  });
  it('is carried by every decision', () => {
    const g = grant({ expiresAt: new Date(NOW.getTime() + 2000) });
    expect(decide([g], request()).cacheableForMs).toBe(2000);
    expect(decide([g], request({ vaultOrgId: 'other' })).cacheableForMs).toBe(MAX_CACHEABLE_MS);
  });
});
