import type { Principal } from '@custos/auth';
import { InvalidArgumentError, UnauthenticatedError } from '@custos/service-kit';
import { auditOf } from '@custos/events';
import { audit } from '../audit/identity-audit.js';
import { requireUser } from './account-fns.js';
import type { AccountStore, StoredSettings } from './account-store.js';

/** A settings field as the API names it (`requirePasskeyForVaults` → `require_passkey_for_vaults`). */
const snakeCase = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A user's security settings as `GET /v1/auth/settings` shows them. */
export interface SettingsView extends StoredSettings {
  passkeyCount: number;
  passkeyRequirementsDowngraded: boolean;
}

/**
 * Security settings of a user. A passkey requirement can only be turned on by a user who has a
 * passkey; passkeys are not built yet, so turning one on is refused for everyone for now.
 */
export class SettingsService {
  constructor(private readonly store: AccountStore) {}

  /** The caller's settings. */
  async get(p: Principal): Promise<SettingsView> {
    const caller = requireUser(p);
    const stored = await this.store.settings(caller.userId);
    if (!stored) throw new UnauthenticatedError();
    return {
      ...stored,
      passkeyCount: await this.passkeyCount(caller.userId),
      // Set when removing the last passkey turns a requirement off; that cannot happen yet.
      passkeyRequirementsDowngraded: false,
    };
  }

  /** Changes the settings that are set; turning a passkey requirement on needs a passkey. */
  async update(
    p: Principal,
    change: { requirePasskeyForVaults?: boolean; requirePasskeyForMfa?: boolean },
  ): Promise<SettingsView> {
    const caller = requireUser(p);
    const wanted: Partial<StoredSettings> = {};
    if (change.requirePasskeyForVaults !== undefined)
      wanted.requirePasskeyForVaults = change.requirePasskeyForVaults;
    if (change.requirePasskeyForMfa !== undefined) wanted.requirePasskeyForMfa = change.requirePasskeyForMfa;
    if (wanted.requirePasskeyForVaults || wanted.requirePasskeyForMfa) {
      if ((await this.passkeyCount(caller.userId)) === 0) {
        const field = wanted.requirePasskeyForVaults
          ? 'require_passkey_for_vaults'
          : 'require_passkey_for_mfa';
        throw new InvalidArgumentError(field, `${field} needs at least one registered passkey`);
      }
    }
    if (Object.keys(wanted).length > 0) {
      await this.store.transaction(async (tx) => {
        await this.store.updateSettings(caller.userId, wanted, tx);
        await audit(
          tx,
          auditOf(
            caller,
            'account.settings_updated',
            { type: 'user', id: caller.userId },
            { fields: Object.keys(wanted).map(snakeCase).sort() },
          ),
        );
      });
    }
    return this.get(p);
  }

  // Passkeys (SPEC.md §4.2) are another slice and have no table yet: nobody has one.
  private async passkeyCount(_userId: string): Promise<number> {
    return 0;
  }
}
