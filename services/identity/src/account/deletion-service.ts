import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import { InvalidArgumentError, UnauthenticatedError, type Logger } from '@custos/service-kit';
import { auditOf } from '@custos/events';
import { audit } from '../audit/identity-audit.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import { ACCOUNT_DELETE_PURPOSE, DELETE_CONFIRMATION, requireUser, tombstoneEmail } from './account-fns.js';
import { revokeUserEverywhere } from './account-sessions.js';
import type { AccountStore } from './account-store.js';
import type { ReauthService } from './reauth-service.js';

/**
 * Deleting one's own account (`DELETE /v1/auth/me`): the exact confirmation phrase, then a step-up
 * for `account.delete`, then a soft delete that frees the e-mail address and ends every token.
 */
export class DeletionService {
  constructor(
    private readonly store: AccountStore,
    private readonly reauth: ReauthService,
    private readonly revocations: RevocationStore,
    private readonly logger: Logger,
  ) {}

  /** Deletes the caller's account. The phrase is checked first, so a typo does not spend a `rat_` token. */
  async deleteAccount(p: Principal, confirmation: unknown, credential: unknown): Promise<void> {
    const caller = requireUser(p);
    if (confirmation !== DELETE_CONFIRMATION) {
      throw new InvalidArgumentError('confirmation', `confirmation must be exactly "${DELETE_CONFIRMATION}"`);
    }
    await this.reauth.confirmStepUp(p, ACCOUNT_DELETE_PURPOSE, credential);
    const deleted = await this.store.transaction(async (tx) => {
      if (!(await this.store.softDeleteUser(caller.userId, tombstoneEmail(randomUUID()), tx))) return false;
      await this.store.revokeRefreshTokens(caller.userId, tx);
      await this.store.deleteEmailChange(caller.userId, tx);
      await this.store.deleteReauthTokens(caller.userId, tx);
      await audit(tx, auditOf(caller, 'user.deleted', { type: 'user', id: caller.userId }, { by: 'self' }));
      return true;
    });
    if (!deleted) throw new UnauthenticatedError();
    await revokeUserEverywhere(this.store, this.revocations, caller.userId);
    this.logger.info({ user_id: caller.userId }, 'account deleted');
  }
}
