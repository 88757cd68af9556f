import { and, asc, count, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { orgInvites, orgMembers, orgs, personalApiKeys, refreshTokens, users } from '../db/schema.js';
import { asRole } from '../users/user-store.js';
import { tombstoneEmail } from './org-fns.js';
import type { InviteRow, OrgMemberView, SubOrgView } from './org-types.js';

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

const memberColumns = {
  id: users.id,
  email: users.email,
  displayName: users.displayName,
  role: orgMembers.role,
  authMethod: users.authMethod,
  createdAt: orgMembers.createdAt,
};

function member(row: { role: string } & Omit<OrgMemberView, 'role'>): OrgMemberView {
  return { ...row, role: asRole(row.role) };
}

/**
 * SQL of orgs, memberships, invitations and sub-orgs. Every method takes an optional transaction.
 * A user's home org is `users.org_id`; "member of an org" below means a live user whose membership
 * row names that org.
 */
export class OrgStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /**
   * Locks an org's row until the transaction ends, so that membership rules that count (the last
   * owner, pending invitations) are decided one request at a time per org. `NO KEY UPDATE` rather
   * than `UPDATE`: it does not block the foreign-key checks of rows that reference the org (a new
   * member being inserted), so it cannot deadlock with an accept that holds its invitation row.
   */
  async lockOrg(orgId: string, tx: Tx): Promise<{ id: string; name: string } | undefined> {
    const rows = await tx
      .select({ id: orgs.id, name: orgs.name })
      .from(orgs)
      .where(eq(orgs.id, orgId))
      .for('no key update');
    return rows[0];
  }

  /** The members of an org, oldest membership first. */
  async listMembers(orgId: string, tx: Tx = this.db): Promise<OrgMemberView[]> {
    const rows = await tx
      .select(memberColumns)
      .from(orgMembers)
      .innerJoin(users, eq(users.id, orgMembers.userId))
      .where(and(eq(orgMembers.orgId, orgId), isNull(users.deletedAt)))
      .orderBy(asc(orgMembers.createdAt), asc(users.id));
    return rows.map(member);
  }

  /** A live user whose home org is `orgId`, with the role there; undefined for anyone else. */
  async findHomeMember(orgId: string, userId: string, tx: Tx = this.db): Promise<OrgMemberView | undefined> {
    const rows = await tx
      .select(memberColumns)
      .from(users)
      .innerJoin(orgMembers, and(eq(orgMembers.userId, users.id), eq(orgMembers.orgId, users.orgId)))
      .where(and(eq(users.id, userId), eq(users.orgId, orgId), isNull(users.deletedAt)));
    return rows[0] ? member(rows[0]) : undefined;
  }

  /** How many live owners an org has. */
  async countOwners(orgId: string, tx: Tx = this.db): Promise<number> {
    const [row] = await tx
      .select({ n: count() })
      .from(orgMembers)
      .innerJoin(users, eq(users.id, orgMembers.userId))
      .where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.role, 'owner'), isNull(users.deletedAt)));
    return row?.n ?? 0;
  }

  /** Sets a member's role in an org. */
  async setRole(orgId: string, userId: string, role: string, tx: Tx = this.db): Promise<void> {
    await tx
      .update(orgMembers)
      .set({ role })
      .where(and(eq(orgMembers.orgId, orgId), eq(orgMembers.userId, userId)));
  }

  /**
   * Deletes a user softly: `deleted_at` set, the e-mail replaced by a tombstone (so the address can
   * be used again), password and TOTP secrets dropped, memberships removed, refresh tokens and
   * personal API keys revoked. Returns the user's home org, or undefined when there is no such
   * live user. Access tokens are revoked by the caller after the commit.
   */
  async softDeleteUser(userId: string, tx: Tx = this.db): Promise<string | undefined> {
    const now = new Date();
    const rows = await tx
      .update(users)
      .set({
        deletedAt: now,
        email: tombstoneEmail(userId),
        passwordHash: null,
        totpEnabled: false,
        totpSecretEnc: null,
        totpPendingSecretEnc: null,
        updatedAt: now,
      })
      .where(and(eq(users.id, userId), isNull(users.deletedAt)))
      .returning({ id: users.id, orgId: users.orgId });
    if (rows.length === 0) return undefined;
    await tx.delete(orgMembers).where(eq(orgMembers.userId, userId));
    await tx
      .update(refreshTokens)
      .set({ revokedAt: now })
      .where(and(eq(refreshTokens.userId, userId), isNull(refreshTokens.revokedAt)));
    await tx
      .update(personalApiKeys)
      .set({ revokedAt: now })
      .where(and(eq(personalApiKeys.userId, userId), isNull(personalApiKeys.revokedAt)));
    return rows[0]!.orgId;
  }

  /** The live user with this e-mail (case-insensitively) and the user's home org. */
  async findUserByEmail(email: string, tx: Tx = this.db): Promise<{ id: string; orgId: string } | undefined> {
    const rows = await tx
      .select({ id: users.id, orgId: users.orgId })
      .from(users)
      .where(and(sql`lower(${users.email}) = ${email.toLowerCase()}`, isNull(users.deletedAt)));
    return rows[0];
  }

  /** Invitations of an org that are neither accepted nor expired. */
  async countPendingInvites(orgId: string, tx: Tx = this.db): Promise<number> {
    const [row] = await tx
      .select({ n: count() })
      .from(orgInvites)
      .where(
        and(eq(orgInvites.orgId, orgId), isNull(orgInvites.acceptedAt), gt(orgInvites.expiresAt, new Date())),
      );
    return row?.n ?? 0;
  }

  /** Ends the pending invitations of an org to an address (a new one replaces them). */
  async expirePendingInvites(orgId: string, email: string, tx: Tx = this.db): Promise<void> {
    const now = new Date();
    await tx
      .update(orgInvites)
      .set({ expiresAt: now })
      .where(
        and(
          eq(orgInvites.orgId, orgId),
          eq(orgInvites.email, email),
          isNull(orgInvites.acceptedAt),
          gt(orgInvites.expiresAt, now),
        ),
      );
  }

  /** Ends one invitation now (its e-mail could not be sent). */
  async expireInvite(id: string, tx: Tx = this.db): Promise<void> {
    await tx.update(orgInvites).set({ expiresAt: new Date() }).where(eq(orgInvites.id, id));
  }

  /** Stores an invitation (its token only as a hash); returns its id. */
  async insertInvite(row: Omit<InviteRow, 'id' | 'acceptedAt'>, tx: Tx = this.db): Promise<string> {
    const [created] = await tx.insert(orgInvites).values(row).returning({ id: orgInvites.id });
    return created!.id;
  }

  /** An invitation by the lookup id of its token. */
  async findInviteByTokenId(tokenId: string, tx: Tx = this.db): Promise<InviteRow | undefined> {
    const rows = await tx.select().from(orgInvites).where(eq(orgInvites.tokenId, tokenId));
    return rows[0];
  }

  /**
   * Marks an invitation accepted if it is still pending, in one statement, so that two concurrent
   * accepts cannot both succeed; false when it was accepted already or has expired.
   */
  async consumeInvite(id: string, tx: Tx = this.db): Promise<boolean> {
    const rows = await tx
      .update(orgInvites)
      .set({ acceptedAt: new Date() })
      .where(and(eq(orgInvites.id, id), isNull(orgInvites.acceptedAt), gt(orgInvites.expiresAt, new Date())))
      .returning({ id: orgInvites.id });
    return rows.length === 1;
  }

  /**
   * Creates an invited user, e-mail already verified (the invitation proved the address), as a
   * member of the inviting org; undefined when the e-mail is taken.
   */
  async insertInvitedUser(
    input: { email: string; displayName: string; passwordHash: string; orgId: string; role: string },
    tx: Tx = this.db,
  ): Promise<string | undefined> {
    const inserted = await tx
      .insert(users)
      .values({
        email: input.email,
        displayName: input.displayName,
        passwordHash: input.passwordHash,
        emailVerified: true,
        orgId: input.orgId,
      })
      .onConflictDoNothing()
      .returning({ id: users.id });
    const id = inserted[0]?.id;
    if (!id) return undefined;
    await tx.insert(orgMembers).values({ orgId: input.orgId, userId: id, role: input.role });
    return id;
  }

  /** Creates an org under `parentOrgId` with `ownerId` recorded as its owner. */
  async insertSubOrg(
    input: { name: string; parentOrgId: string; ownerId: string },
    tx: Tx = this.db,
  ): Promise<SubOrgView> {
    const [org] = await tx
      .insert(orgs)
      .values({ name: input.name, parentOrgId: input.parentOrgId })
      .returning();
    await tx.insert(orgMembers).values({ orgId: org!.id, userId: input.ownerId, role: 'owner' });
    return { id: org!.id, name: org!.name, parentOrgId: input.parentOrgId, createdAt: org!.createdAt };
  }

  /** The sub-orgs of an org, oldest first. */
  async listSubOrgs(parentOrgId: string, tx: Tx = this.db): Promise<SubOrgView[]> {
    const rows = await tx
      .select()
      .from(orgs)
      .where(eq(orgs.parentOrgId, parentOrgId))
      .orderBy(asc(orgs.createdAt), asc(orgs.id));
    return rows.map((o) => ({ id: o.id, name: o.name, parentOrgId: parentOrgId, createdAt: o.createdAt }));
  }
}
