import { and, eq } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { audit } from '../audit/identity-audit.js';
import { orgMembers, orgs, users } from '../db/schema.js';
import type { AccountGate } from '../users/account-gate.js';

/** SQL of accounts that Google sign-in creates or claims. */
export class GoogleStore {
  constructor(private readonly db: Database) {}

  /**
   * Creates an org and its owner signed up with Google (no password, e-mail verified). Returns the
   * user id, or undefined when the e-mail was taken meanwhile (nothing is created then). `gate`
   * (SIGNUP_MODE) admits the account in the same transaction, or refuses it.
   */
  async createGoogleUser(
    input: { email: string; displayName: string; orgName: string },
    gate: Pick<AccountGate, 'admit' | 'settle'>,
  ): Promise<string | undefined> {
    try {
      return await this.db.transaction(async (tx) => {
        const admitted = await gate.admit('google', tx);
        const [org] = await tx.insert(orgs).values({ name: input.orgName }).returning({ id: orgs.id });
        const inserted = await tx
          .insert(users)
          .values({
            email: input.email,
            displayName: input.displayName,
            passwordHash: null,
            authMethod: 'google',
            emailVerified: true,
            orgId: org!.id,
          })
          .onConflictDoNothing()
          .returning({ id: users.id });
        // Roll the org back with it.
        if (inserted.length === 0) throw new EmailTaken();
        await tx.insert(orgMembers).values({ orgId: org!.id, userId: inserted[0]!.id, role: 'owner' });
        const platformAdmin = await gate.settle(inserted[0]!.id, admitted, tx);
        await audit(tx, {
          orgId: org!.id,
          actorType: 'user',
          actorId: inserted[0]!.id,
          action: 'user.created',
          resourceType: 'user',
          resourceId: inserted[0]!.id,
          metadata: { method: 'google', role: 'owner', ...(platformAdmin ? { platform_admin: true } : {}) },
        });
        return inserted[0]!.id;
      });
    } catch (err) {
      if (err instanceof EmailTaken) return undefined;
      throw err;
    }
  }

  /**
   * Google proved the address of an account whose e-mail was never verified: mark it verified and
   * drop the password, which whoever registered the address without owning it may know.
   */
  async claimUnverified(userId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const rows = await tx
        .update(users)
        .set({ emailVerified: true, passwordHash: null, updatedAt: new Date() })
        .where(and(eq(users.id, userId), eq(users.emailVerified, false)))
        .returning({ orgId: users.orgId });
      if (!rows[0]) return;
      await audit(tx, {
        orgId: rows[0].orgId,
        actorType: 'user',
        actorId: userId,
        action: 'email.verified',
        resourceType: 'user',
        resourceId: userId,
        metadata: { method: 'google', password_removed: true },
      });
    });
  }
}

class EmailTaken extends Error {}
