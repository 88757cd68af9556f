import { type Principal, type UserPrincipal, requireHuman, requireHumanAdmin } from '@custos/auth';
import { auditOf } from '@custos/events';
import { NotFoundError, UnauthenticatedError } from '@custos/service-kit';
import { audit } from '../audit/identity-audit.js';
import { MEMBER_ROLE_CHANGE_PURPOSE } from '../account/account-fns.js';
import type { StepUpChecker } from '../mfa/mfa-types.js';
import type { Revocation, RevocationStore } from '../tokens/revocation-store.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import {
  msUntilPastRevocation,
  normalizeOrgName,
  parseRole,
  parseUuid,
  removalRefusal,
  roleChangeRefusal,
} from './org-fns.js';
import type { OrgStore } from './org-store.js';
import type { OrgMemberView, SubOrgView } from './org-types.js';

type Tx = Parameters<Parameters<OrgStore['transaction']>[0]>[0];

/** A human caller, or 403 for an agent. */
function humanCaller(p: Principal, what: string): UserPrincipal {
  requireHuman(p, what);
  return p;
}

/**
 * Makes every access token of a user issued until now stop working (their claims — role, org —
 * are stale, or the user is gone). User tokens live at most the access-token lifetime, so the
 * revocation needs to last no longer than that. Returns the instant of the revocation.
 */
export async function revokeUserTokens(
  revocations: RevocationStore,
  issuer: TokenIssuer,
  userId: string,
): Promise<number> {
  const now = Date.now();
  await revocations.revokeSubjectBefore(
    `user:${userId}`,
    new Date(now),
    new Date(now + issuer.settings.userAccessTtlSeconds * 1000),
  );
  return now;
}

/**
 * Members of the caller's org (roles owner, admin, member) and its sub-orgs. Decisions use the
 * caller's role as stored now, not the one in the token (a demoted admin's token still says admin), and rules that count owners run under a
 * lock of the org's row, so concurrent changes cannot leave an org without an owner.
 */
export class OrgService {
  constructor(
    private readonly store: OrgStore,
    private readonly issuer: TokenIssuer,
    private readonly revocations: RevocationStore,
    private readonly stepUp: StepUpChecker,
  ) {}

  /** The caller's current membership of the home org; 401 when it no longer exists. */
  private async me(p: UserPrincipal, tx?: Tx): Promise<OrgMemberView> {
    const me = await this.store.findHomeMember(p.orgId, p.userId, tx);
    if (!me) throw new UnauthenticatedError('your account is no longer a member of this org');
    return me;
  }

  /** The members of the caller's org; any human of the org may list them. */
  async listMembers(p: Principal): Promise<OrgMemberView[]> {
    const caller = humanCaller(p, 'list members');
    return this.store.listMembers(caller.orgId);
  }

  /**
   * Changes a member's role (see roleChangeRefusal). A real change revokes the member's current
   * tokens, whose `role` claim it makes stale; the member signs in or refreshes to get the new one.
   * The revocation is recorded and published to Redis inside the transaction of the change (a
   * change never commits without it: when it cannot be published the answer is 503 and nothing
   * changed), and stamped again and published after commit. The step-up
   * `org.member.role_change` is checked first.
   */
  async updateRole(
    p: Principal,
    userId: unknown,
    role: unknown,
    credential: unknown,
  ): Promise<OrgMemberView> {
    const caller = humanCaller(p, 'change roles');
    const targetId = parseUuid(userId, 'user_id');
    const newRole = parseRole(role);
    /** The member to change, or the refusal: decided before the step-up and again under the lock. */
    const decide = async (tx?: Tx) => {
      const me = await this.me(caller, tx);
      requireHumanAdmin({ ...caller, role: me.role }, 'change roles');
      const target = await this.store.findHomeMember(caller.orgId, targetId, tx);
      if (!target) throw new NotFoundError('member', targetId);
      const refusal = roleChangeRefusal(
        {
          callerRole: me.role,
          self: me.id === target.id,
          targetRole: target.role,
          ownerCount: await this.store.countOwners(caller.orgId, tx),
        },
        newRole,
      );
      if (refusal) throw refusal;
      return target;
    };
    // A change that would be refused does not spend the caller's rat_ token (or a TOTP step).
    const current = await decide();
    if (current.role === newRole) return current;
    await this.stepUp.confirmStepUp(caller, MEMBER_ROLE_CHANGE_PURPOSE, credential);
    const result = await this.store.transaction(async (tx) => {
      await this.store.lockOrg(caller.orgId, tx);
      const target = await decide(tx);
      if (target.role === newRole) return { member: target, changed: false };
      await this.store.setRole(caller.orgId, target.id, newRole, tx);
      const revocation = this.userRevocation(target.id);
      await this.revocations.record([revocation], tx);
      // Published before the change commits: when it cannot be (Redis unreachable) the change
      // rolls back with a 503 and nothing changed. A revocation whose change then rolls back for
      // another reason only makes the member sign in again.
      await this.revocations.publish([revocation]);
      await audit(
        tx,
        auditOf(
          caller,
          'org.member_role_changed',
          { type: 'user', id: target.id },
          { from_role: target.role, to_role: newRole },
        ),
      );
      return { member: { ...target, role: newRole }, changed: true };
    });
    if (result.changed) {
      // Stamped again now that the change is visible: a token minted with the old role between
      // the first stamp and the commit is covered too. A failed publish here (Redis lost in
      // between) is a 503 with the change made: stored, and republished within a minute.
      const fresh = this.userRevocation(result.member.id);
      await this.revocations.record([fresh]);
      await this.revocations.publish([fresh]);
      // Answer once a fresh sign-in (carrying the new role) is no longer covered by the revocation.
      const wait = msUntilPastRevocation(fresh.notBefore!.getTime(), Date.now());
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    return result.member;
  }

  /** The revocation of every token of a user issued until now (as long as a user token lives). */
  private userRevocation(userId: string): Revocation {
    const now = Date.now();
    return {
      kind: 'sub',
      value: `user:${userId}`,
      notBefore: new Date(now),
      expiresAt: new Date(now + this.issuer.settings.userAccessTtlSeconds * 1000),
    };
  }

  /**
   * Removes a member (see removalRefusal). The org is the member's home org and a user without one
   * cannot sign in, so removal deletes the account (softly, as account deletion does) and revokes
   * every token of it.
   */
  async removeMember(p: Principal, userId: unknown): Promise<void> {
    const caller = humanCaller(p, 'remove members');
    const removedId = await this.store.transaction(async (tx) => {
      await this.store.lockOrg(caller.orgId, tx);
      const me = await this.me(caller, tx);
      requireHumanAdmin({ ...caller, role: me.role }, 'remove members');
      const targetId = parseUuid(userId, 'user_id');
      const target = await this.store.findHomeMember(caller.orgId, targetId, tx);
      if (!target) throw new NotFoundError('member', targetId);
      const refusal = removalRefusal({
        callerRole: me.role,
        self: me.id === target.id,
        targetRole: target.role,
        ownerCount: await this.store.countOwners(caller.orgId, tx),
      });
      if (refusal) throw refusal;
      await this.store.softDeleteUser(target.id, tx);
      await audit(
        tx,
        auditOf(caller, 'org.member_removed', { type: 'user', id: target.id }, { role: target.role }),
      );
      return target.id;
    });
    await revokeUserTokens(this.revocations, this.issuer, removedId);
  }

  /**
   * Creates a sub-org of the caller's org. Users have one home org, so the caller is recorded as
   * the sub-org's owner in its membership rows only; tokens for a sub-org are not issued yet.
   */
  async createSubOrg(p: Principal, name: unknown): Promise<SubOrgView> {
    const caller = humanCaller(p, 'create sub-orgs');
    const me = await this.me(caller);
    requireHumanAdmin({ ...caller, role: me.role }, 'create sub-orgs');
    const clean = normalizeOrgName(name);
    return this.store.transaction(async (tx) => {
      const sub = await this.store.insertSubOrg(
        { name: clean, parentOrgId: caller.orgId, ownerId: caller.userId },
        tx,
      );
      await audit(
        tx,
        auditOf(caller, 'org.sub_org_created', { type: 'org', id: sub.id }, { parent_org_id: caller.orgId }),
      );
      return sub;
    });
  }

  /** The sub-orgs of the caller's org; any human of the org may list them. */
  async listSubOrgs(p: Principal): Promise<SubOrgView[]> {
    const caller = humanCaller(p, 'list sub-orgs');
    return this.store.listSubOrgs(caller.orgId);
  }
}
