import { type Principal, type UserPrincipal, requireHuman } from '@custos/auth';
import { NotFoundError, PermissionDeniedError } from '@custos/service-kit';
import { auditOf } from '@custos/events';
import { audit } from '../audit/identity-audit.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import { parsePage, parseSettingName, parseSettingValue } from './admin-fns.js';
import type { AdminStore } from './admin-store.js';
import { parseUuid } from './org-fns.js';
import { revokeUserTokens } from './org-service.js';
import type { OrgStore } from './org-store.js';
import type { AdminSettingView, AdminUserView } from './org-types.js';

const ADMINS_ONLY = 'only platform admins may use the admin endpoints';

/**
 * The platform-admin endpoints: every user of the platform, and the platform settings. Platform
 * admins are the addresses of PLATFORM_ADMIN_EMAILS and the install's first account (SIGNUP_MODE,
 * when that list is empty); the check reads the caller's current address and flag
 * on every call, so removing an address from the list takes effect at once, whatever the token says.
 */
export class AdminService {
  constructor(
    private readonly store: AdminStore,
    private readonly orgs: OrgStore,
    private readonly issuer: TokenIssuer,
    private readonly revocations: RevocationStore,
  ) {}

  private async admin(p: Principal): Promise<UserPrincipal> {
    requireHuman(p, 'use the admin endpoints');
    const caller = p;
    const facts = await this.store.findAdminFacts(caller.userId);
    if (!facts || !this.issuer.isPlatformAdmin(facts)) throw new PermissionDeniedError(ADMINS_ONLY);
    return caller;
  }

  /** One page of the live users, oldest first, and how many there are in all. */
  async listUsers(
    p: Principal,
    limit: unknown,
    offset: unknown,
  ): Promise<{ users: AdminUserView[]; total: number }> {
    await this.admin(p);
    const page = parsePage(limit, offset);
    const [rows, total] = await Promise.all([
      this.store.listUsers(page.limit, page.offset),
      this.store.countUsers(),
    ]);
    return {
      users: rows.map(({ storedPlatformAdmin, ...r }) => ({
        ...r,
        platformAdmin: this.issuer.isPlatformAdmin({ email: r.email, platformAdmin: storedPlatformAdmin }),
      })),
      total,
    };
  }

  /**
   * Deletes a user softly (as account deletion does) and revokes every token of it. A platform
   * admin does not delete their own account here (DELETE /v1/auth/me does, with confirmation).
   */
  async deleteUser(p: Principal, userId: unknown): Promise<void> {
    const caller = await this.admin(p);
    const id = parseUuid(userId, 'user_id');
    if (id === caller.userId) {
      throw new PermissionDeniedError('delete your own account with DELETE /v1/auth/me instead');
    }
    const deleted = await this.orgs.transaction(async (tx) => {
      const orgId = await this.orgs.softDeleteUser(id, tx);
      if (!orgId) return false;
      // Recorded under the deleted user's org, where the change happened.
      await audit(tx, {
        orgId,
        actorType: 'user',
        actorId: caller.userId,
        action: 'user.deleted',
        resourceType: 'user',
        resourceId: id,
        metadata: { by: 'platform_admin' },
      });
      return true;
    });
    if (!deleted) throw new NotFoundError('user', id);
    await revokeUserTokens(this.revocations, this.issuer, id);
  }

  /** Every platform setting, by name. */
  async listSettings(p: Principal): Promise<AdminSettingView[]> {
    await this.admin(p);
    return this.store.listSettings();
  }

  /** One platform setting; 404 when it was never set. */
  async getSetting(p: Principal, name: unknown): Promise<AdminSettingView> {
    await this.admin(p);
    const n = parseSettingName(name);
    const setting = await this.store.getSetting(n);
    if (!setting) throw new NotFoundError('setting', n);
    return setting;
  }

  /** Creates or replaces a platform setting. */
  async putSetting(p: Principal, name: unknown, value: unknown): Promise<AdminSettingView> {
    const caller = await this.admin(p);
    const n = parseSettingName(name);
    const v = parseSettingValue(n, value);
    // Platform settings belong to no org: the record goes to the acting admin's org.
    return this.orgs.transaction(async (tx) => {
      const stored = await this.store.putSetting({ name: n, value: v, updatedBy: caller.userId }, tx);
      await audit(
        tx,
        auditOf(caller, 'admin.setting_changed', { type: 'platform_setting', id: n }, { name: n }),
      );
      return stored;
    });
  }
}
