import { and, asc, count, eq, isNull } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { adminSettings, orgMembers, orgs, users } from '../db/schema.js';
import { asRole } from '../users/user-store.js';
import type { AdminSettingView } from './org-types.js';

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

/** A user row as the platform admin list shows it (before the platform-admin flag is added). */
export interface AdminUserRow {
  id: string;
  email: string;
  displayName: string;
  role: ReturnType<typeof asRole>;
  authMethod: string;
  orgId: string;
  orgName: string;
  createdAt: Date;
  /** The stored flag (the install's first account); PLATFORM_ADMIN_EMAILS is added by the service. */
  storedPlatformAdmin: boolean;
}

/** SQL of the platform-admin views: every user, and the platform settings. */
export class AdminStore {
  constructor(private readonly db: Database) {}

  /** One page of the live users, oldest first, with their home org and role there. */
  async listUsers(limit: number, offset: number, tx: Tx = this.db): Promise<AdminUserRow[]> {
    const rows = await tx
      .select({
        id: users.id,
        email: users.email,
        displayName: users.displayName,
        role: orgMembers.role,
        authMethod: users.authMethod,
        orgId: users.orgId,
        orgName: orgs.name,
        createdAt: users.createdAt,
        storedPlatformAdmin: users.platformAdmin,
      })
      .from(users)
      .innerJoin(orgs, eq(orgs.id, users.orgId))
      .leftJoin(orgMembers, and(eq(orgMembers.userId, users.id), eq(orgMembers.orgId, users.orgId)))
      .where(isNull(users.deletedAt))
      .orderBy(asc(users.createdAt), asc(users.id))
      .limit(limit)
      .offset(offset);
    return rows.map((r) => ({ ...r, role: asRole(r.role ?? 'member') }));
  }

  /** How many live users there are. */
  async countUsers(tx: Tx = this.db): Promise<number> {
    const [row] = await tx.select({ n: count() }).from(users).where(isNull(users.deletedAt));
    return row?.n ?? 0;
  }

  /** A live user's e-mail and stored platform-admin flag (to decide whether the user is a platform admin). */
  async findAdminFacts(
    id: string,
    tx: Tx = this.db,
  ): Promise<{ email: string; platformAdmin: boolean } | undefined> {
    const rows = await tx
      .select({ email: users.email, platformAdmin: users.platformAdmin })
      .from(users)
      .where(and(eq(users.id, id), isNull(users.deletedAt)));
    return rows[0];
  }

  /** Every setting, by name. */
  listSettings(tx: Tx = this.db): Promise<AdminSettingView[]> {
    return tx.select().from(adminSettings).orderBy(asc(adminSettings.name));
  }

  /** One setting. */
  async getSetting(name: string, tx: Tx = this.db): Promise<AdminSettingView | undefined> {
    const rows = await tx.select().from(adminSettings).where(eq(adminSettings.name, name));
    return rows[0];
  }

  /** Creates or replaces a setting; returns it as stored. */
  async putSetting(
    row: { name: string; value: string; updatedBy: string },
    tx: Tx = this.db,
  ): Promise<AdminSettingView> {
    const now = new Date();
    const [stored] = await tx
      .insert(adminSettings)
      .values({ ...row, updatedAt: now })
      .onConflictDoUpdate({
        target: adminSettings.name,
        set: { value: row.value, updatedBy: row.updatedBy, updatedAt: now },
      })
      .returning();
    return stored!;
  }
}
