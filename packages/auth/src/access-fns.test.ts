import { PermissionDeniedError } from '@custos/service-kit';
import {
  actorOf,
  isCreator,
  isCreatorOrAdmin,
  isOrgAdmin,
  requireHuman,
  requireHumanAdmin,
} from './access-fns';
import type { AgentPrincipal, Principal, UserPrincipal } from './principal-types';

const base = { orgId: 'o1', tokenId: 't', issuedAt: 1, expiresAt: 2, issuer: 'i' };
const user = (role: UserPrincipal['role']): UserPrincipal => ({
  ...base,
  kind: 'user',
  userId: 'u1',
  role,
  platformAdmin: false,
  amr: [],
  requirePasskeyForVaults: false,
});
const agent: AgentPrincipal = {
  ...base,
  kind: 'agent',
  agentId: 'a1',
  scopes: [],
  vaultIds: [],
  intentsApiEnabled: false,
  proxyEnabled: false,
};

describe('access-fns', () => {
  it('isOrgAdmin: owners and admins only, never agents', () => {
    expect(isOrgAdmin(user('owner'))).toBe(true);
    expect(isOrgAdmin(user('admin'))).toBe(true);
    expect(isOrgAdmin(user('member'))).toBe(false);
    expect(isOrgAdmin(agent)).toBe(false);
  });

  it('requireHumanAdmin refuses members and agents with a 403 naming the action', () => {
    expect(() => requireHumanAdmin(user('admin'), 'do x')).not.toThrow();
    const refusals: Principal[] = [user('member'), agent];
    for (const p of refusals) {
      let caught: unknown;
      try {
        requireHumanAdmin(p, 'manage webhooks');
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(PermissionDeniedError);
      expect((caught as PermissionDeniedError).detail).toContain('manage webhooks');
    }
  });

  it('requireHuman refuses agents only', () => {
    expect(() => requireHuman(user('member'), 'x')).not.toThrow();
    expect(() => requireHuman(agent, 'x')).toThrow(PermissionDeniedError);
  });

  it('actorOf names the user or the agent', () => {
    expect(actorOf(user('member'))).toEqual({ actorType: 'user', actorId: 'u1' });
    expect(actorOf(agent)).toEqual({ actorType: 'agent', actorId: 'a1' });
  });
});

describe('isCreator / isCreatorOrAdmin', () => {
  const made = { createdBy: 'u1', createdByType: 'user' };
  it('matches the same user, never an agent with the same id', () => {
    expect(isCreator(user('member'), made)).toBe(true);
    expect(isCreator({ ...agent, agentId: 'u1' }, made)).toBe(false);
  });
  it('lets org owners and admins in, not other members', () => {
    expect(isCreatorOrAdmin({ ...user('admin'), userId: 'u2' }, made)).toBe(true);
    expect(isCreatorOrAdmin({ ...user('member'), userId: 'u2' }, made)).toBe(false);
  });
});
