import { type Principal, requireHuman, requireHumanAdmin } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  ConflictError,
  InvalidArgumentError,
  type Logger,
  PermissionDeniedError,
  UnauthenticatedError,
  UnavailableError,
  describeError,
} from '@custos/service-kit';
import { checkPasswordPolicy, hashPassword } from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { audit } from '../audit/identity-audit.js';
import type { Notifier } from '../notifications/notifier.js';
import type { AccountGate } from '../users/account-gate.js';
import { normalizeDisplayName, normalizeEmail } from '../users/user-fns.js';
import { asRole } from '../users/user-store.js';
import type { OrgRole } from '../users/user-types.js';
import { INVITE_TTL_SECONDS, inviterName, parseInviteRole } from './invite-fns.js';
import type { OrgStore } from './org-store.js';

const PREFIX = SECRET_TOKEN_PREFIXES.email;
/** Every unusable token (unknown, wrong secret, used, expired, superseded) answers this. */
const INVALID_INVITE = 'invalid or expired invitation token';

/** Settings of invitations. */
export interface InviteServiceOptions {
  /** Most pending invitations per org (ORG_MAX_PENDING_INVITES). */
  maxPendingInvites: number;
}

/** What accepting an invitation created. */
export interface AcceptedInvite {
  userId: string;
  email: string;
  orgId: string;
  role: OrgRole;
}

/**
 * Invitations to join an org: owners and admins invite an address with a role (member or admin);
 * the e-mail carries a single-use `cse_` token (7 days) stored as a hash. Accepting it creates the
 * account, already verified, in the inviting org. Users have one home org, so an address that
 * already has an account elsewhere cannot accept yet (409).
 */
export class InviteService {
  constructor(
    private readonly store: OrgStore,
    private readonly notifier: Pick<Notifier, 'orgInvite'>,
    private readonly opts: InviteServiceOptions,
    private readonly logger: Logger,
    private readonly gate: Pick<AccountGate, 'precheck' | 'admit'>,
  ) {}

  /**
   * Invites an address. A new invitation to the same address replaces the pending ones; an address
   * that is already a member is 409. Whether the address has an account in another org is not
   * revealed here (only its owner learns it, on accepting).
   */
  async invite(p: Principal, rawEmail: unknown, rawRole: unknown): Promise<{ email: string }> {
    requireHuman(p, 'invite members');
    const caller = p;
    const t = generateSecretToken(PREFIX);
    const sent = await this.store.transaction(async (tx) => {
      const org = await this.store.lockOrg(caller.orgId, tx);
      const me = org && (await this.store.findHomeMember(caller.orgId, caller.userId, tx));
      if (!org || !me) throw new UnauthenticatedError('your account is no longer a member of this org');
      // The role as stored now decides, not the one in the token.
      requireHumanAdmin({ ...caller, role: me.role }, 'invite members');
      const email = normalizeEmail(rawEmail);
      const role = parseInviteRole(rawRole);
      const existing = await this.store.findUserByEmail(email, tx);
      if (existing?.orgId === caller.orgId) {
        throw new ConflictError(`${email} is already a member of this org`, 'email');
      }
      await this.store.expirePendingInvites(caller.orgId, email, tx);
      if ((await this.store.countPendingInvites(caller.orgId, tx)) >= this.opts.maxPendingInvites) {
        throw new PermissionDeniedError(
          `an org may have at most ${this.opts.maxPendingInvites} pending invitations`,
          { type: 'resource_limit_exceeded' },
        );
      }
      const id = await this.store.insertInvite(
        {
          orgId: caller.orgId,
          email,
          role,
          tokenId: t.id,
          secretHash: t.secretHash,
          invitedBy: caller.userId,
          expiresAt: new Date(Date.now() + INVITE_TTL_SECONDS * 1000),
        },
        tx,
      );
      // The invited address stays out of the append-only log; the invitation id leads to it.
      await audit(tx, auditOf(caller, 'org.member_invited', { type: 'org_invite', id: id }, { role }));
      return { id, email, orgName: org.name, inviter: inviterName(me) };
    });
    try {
      await this.notifier.orgInvite(sent.email, {
        orgName: sent.orgName,
        inviter: sent.inviter,
        token: t.token,
        expiresInSeconds: INVITE_TTL_SECONDS,
      });
    } catch (err) {
      // An invitation nobody received must not stay usable; the inviter can send it again.
      this.logger.error({ err: describeError(err), template: 'org_invite' }, 'e-mail could not be sent');
      await this.store.expireInvite(sent.id);
      throw new UnavailableError('the invitation e-mail could not be sent; try again later');
    }
    return { email: sent.email };
  }

  /**
   * Accepts an invitation (public: the token is the credential). For an address without an
   * account, creates it with the password, verified, as a member of the inviting org; the user then
   * signs in as usual. The token works once; a refused accept (409, 400) leaves it unused.
   */
  async accept(input: { token: unknown; password: unknown; displayName: unknown }): Promise<AcceptedInvite> {
    const parsed = typeof input.token === 'string' ? parseSecretToken(input.token, PREFIX) : undefined;
    if (!parsed) throw new InvalidArgumentError('token', INVALID_INVITE);
    const invite = await this.store.findInviteByTokenId(parsed.id);
    if (
      !invite ||
      !secretMatches(parsed.secret, invite.secretHash) ||
      invite.acceptedAt ||
      invite.expiresAt.getTime() <= Date.now()
    ) {
      throw new InvalidArgumentError('token', INVALID_INVITE);
    }
    const existing = await this.store.findUserByEmail(invite.email);
    if (existing && existing.orgId === invite.orgId) {
      // Nearly always a parallel accept of this very token that has just won: a used token is 400.
      if ((await this.store.findInviteByTokenId(parsed.id))?.acceptedAt) {
        throw new InvalidArgumentError('token', INVALID_INVITE);
      }
      throw new ConflictError('this account is already a member of the org', 'email');
    }
    if (existing) {
      throw new ConflictError(
        'this e-mail address already has an account in another org; moving an account between orgs ' +
          'is not supported yet',
        'email',
      );
    }
    if (typeof input.password !== 'string' || input.password === '') {
      throw new InvalidArgumentError('password', 'password is required to create the account');
    }
    const policy = checkPasswordPolicy(input.password);
    if (policy) throw new InvalidArgumentError('password', policy);
    const displayName = normalizeDisplayName(input.displayName);
    // SIGNUP_MODE `closed` refuses invited people too (403 signup_closed); the invitation stays unused.
    await this.gate.precheck('invitation');
    const passwordHash = await hashPassword(input.password);
    const role = asRole(invite.role);
    const userId = await this.store.transaction(async (tx) => {
      await this.gate.admit('invitation', tx);
      if (!(await this.store.consumeInvite(invite.id, tx)))
        throw new InvalidArgumentError('token', INVALID_INVITE);
      const id = await this.store.insertInvitedUser(
        { email: invite.email, displayName, passwordHash, orgId: invite.orgId, role },
        tx,
      );
      // Someone signed up with the address meanwhile: the transaction rolls back, the token stays.
      if (!id) throw new ConflictError('this e-mail address already has an account', 'email');
      await audit(tx, {
        orgId: invite.orgId,
        actorType: 'user',
        actorId: id,
        action: 'org.invite_accepted',
        resourceType: 'user',
        resourceId: id,
        metadata: { invite_id: invite.id, role, invited_by: invite.invitedBy },
      });
      return id;
    });
    return { userId, email: invite.email, orgId: invite.orgId, role };
  }
}
