import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { emailTokens, orgMembers, orgs, refreshTokens, users } from '../db/schema.js';
import type { OrgRole, User } from './user-types.js';

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

const userColumns = {
  id: users.id,
  email: users.email,
  displayName: users.displayName,
  passwordHash: users.passwordHash,
  authMethod: users.authMethod,
  emailVerified: users.emailVerified,
  marketingEmails: users.marketingEmails,
  totpEnabled: users.totpEnabled,
  requirePasskeyForVaults: users.requirePasskeyForVaults,
  platformAdmin: users.platformAdmin,
  orgId: users.orgId,
  role: orgMembers.role,
  createdAt: users.createdAt,
};

/** SQL of users, orgs, refresh tokens and e-mailed tokens. Every method takes an optional transaction. */
export class UserStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Creates an org, its owner, and the membership; false when the e-mail is taken. */
  async createUserWithOrg(
    input: {
      email: string;
      displayName: string;
      passwordHash: string;
      orgName: string;
      emailVerified: boolean;
    },
    tx: Tx = this.db,
  ): Promise<User | undefined> {
    const [org] = await tx.insert(orgs).values({ name: input.orgName }).returning({ id: orgs.id });
    const inserted = await tx
      .insert(users)
      .values({
        email: input.email,
        displayName: input.displayName,
        passwordHash: input.passwordHash,
        emailVerified: input.emailVerified,
        orgId: org!.id,
      })
      .onConflictDoNothing()
      .returning({ id: users.id });
    if (inserted.length === 0) return undefined;
    await tx.insert(orgMembers).values({ orgId: org!.id, userId: inserted[0]!.id, role: 'owner' });
    return this.findById(inserted[0]!.id, tx);
  }

  /**
   * Whether the install has ever had an account (deleted ones count), after waiting for any other
   * transaction that is creating the install's first account: `lock` takes a transaction-scoped
   * advisory lock first, so of two parallel first signups one sees the other's committed row.
   */
  async anyAccountExists(lock: boolean, tx: Tx = this.db): Promise<boolean> {
    if (lock) await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext('custos.identity.first-account'))`);
    const rows = await tx.select({ id: users.id }).from(users).limit(1);
    return rows.length > 0;
  }

  /** Records a user as a platform admin (the install's first account). */
  async markPlatformAdmin(id: string, tx: Tx = this.db): Promise<void> {
    await tx.update(users).set({ platformAdmin: true }).where(eq(users.id, id));
  }

  /** A user by id, with the role in the user's org. */
  async findById(id: string, tx: Tx = this.db): Promise<User | undefined> {
    const rows = await tx
      .select(userColumns)
      .from(users)
      .innerJoin(orgMembers, and(eq(orgMembers.userId, users.id), eq(orgMembers.orgId, users.orgId)))
      .where(and(eq(users.id, id), isNull(users.deletedAt)));
    return rows[0] as User | undefined;
  }

  /** A user by e-mail, case-insensitively. */
  async findByEmail(email: string, tx: Tx = this.db): Promise<User | undefined> {
    const rows = await tx
      .select(userColumns)
      .from(users)
      .innerJoin(orgMembers, and(eq(orgMembers.userId, users.id), eq(orgMembers.orgId, users.orgId)))
      .where(and(sql`lower(${users.email}) = ${email.toLowerCase()}`, isNull(users.deletedAt)));
    return rows[0] as User | undefined;
  }

  /** Changes profile fields that are set. */
  async updateProfile(
    id: string,
    fields: { displayName?: string; marketingEmails?: boolean },
    tx: Tx = this.db,
  ): Promise<void> {
    await tx
      .update(users)
      .set({ ...fields, updatedAt: new Date() })
      .where(eq(users.id, id));
  }

  /**
   * Replaces a password hash by a stronger one of the same password, only if the stored hash is
   * still `oldHash` (a password change meanwhile wins); true when it was replaced.
   */
  async replacePasswordHash(
    id: string,
    oldHash: string,
    newHash: string,
    tx: Tx = this.db,
  ): Promise<boolean> {
    const rows = await tx
      .update(users)
      .set({ passwordHash: newHash })
      .where(and(eq(users.id, id), eq(users.passwordHash, oldHash)))
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /** Marks the e-mail verified. */
  async markEmailVerified(id: string, tx: Tx = this.db): Promise<void> {
    await tx.update(users).set({ emailVerified: true, updatedAt: new Date() }).where(eq(users.id, id));
  }

  /** Stores an e-mailed token (only its hash). */
  async insertEmailToken(
    row: { id: string; userId: string; purpose: string; secretHash: string; expiresAt: Date },
    tx: Tx = this.db,
  ): Promise<void> {
    await tx.insert(emailTokens).values(row);
  }

  /**
   * Consumes an e-mailed token of `purpose` (once, unexpired) only when `matches` accepts its stored
   * hash: the row is locked and compared before it is marked used, so a request with the right id
   * but a wrong secret leaves the token usable for its owner.
   */
  async consumeEmailToken(
    id: string,
    purpose: string,
    matches: (secretHash: string) => boolean,
    tx: Tx = this.db,
  ): Promise<{ userId: string } | undefined> {
    const [row] = await tx
      .select({ userId: emailTokens.userId, secretHash: emailTokens.secretHash })
      .from(emailTokens)
      .where(
        and(
          eq(emailTokens.id, id),
          eq(emailTokens.purpose, purpose),
          isNull(emailTokens.usedAt),
          gt(emailTokens.expiresAt, new Date()),
        ),
      )
      .for('update');
    if (!row || !matches(row.secretHash)) return undefined;
    const used = await tx
      .update(emailTokens)
      .set({ usedAt: new Date() })
      .where(and(eq(emailTokens.id, id), isNull(emailTokens.usedAt)))
      .returning({ userId: emailTokens.userId });
    return used[0];
  }

  /** Stores a refresh token (only its hash). */
  async insertRefreshToken(
    row: {
      id: string;
      familyId: string;
      userId: string;
      secretHash: string;
      amr: string[];
      expiresAt: Date;
      /** The database's now() unless given (a family's first token: the instant its lifetime counts from). */
      createdAt?: Date;
    },
    tx: Tx = this.db,
  ): Promise<void> {
    await tx.insert(refreshTokens).values(row);
  }

  /** A refresh token row, locked until the transaction ends (the rotate-or-reuse decision). */
  async lockRefreshToken(id: string, tx: Tx) {
    const rows = await tx.select().from(refreshTokens).where(eq(refreshTokens.id, id)).for('update');
    return rows[0];
  }

  /** When a refresh-token family began: its first token's creation (the sign-in); undefined for none. */
  async familyStartedAt(familyId: string, tx: Tx = this.db): Promise<Date | undefined> {
    const rows = await tx
      .select({ started: sql<string | null>`min(${refreshTokens.createdAt})` })
      .from(refreshTokens)
      .where(eq(refreshTokens.familyId, familyId));
    const started = rows[0]?.started;
    return started ? new Date(started) : undefined;
  }

  /** Marks a (locked) refresh token used. */
  async markRefreshTokenUsed(id: string, tx: Tx): Promise<void> {
    await tx.update(refreshTokens).set({ usedAt: new Date() }).where(eq(refreshTokens.id, id));
  }

  /** Revokes every refresh token of a family (a session). */
  async revokeFamily(familyId: string, tx: Tx = this.db): Promise<void> {
    await tx
      .update(refreshTokens)
      .set({ revokedAt: new Date() })
      .where(and(eq(refreshTokens.familyId, familyId), isNull(refreshTokens.revokedAt)));
  }
}

/** A role string as stored, narrowed. */
export function asRole(role: string): OrgRole {
  return role === 'owner' || role === 'admin' ? role : 'member';
}
