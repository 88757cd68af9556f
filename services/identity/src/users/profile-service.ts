import { type Principal, requireHuman } from '@custos/auth';
import { UnauthenticatedError } from '@custos/service-kit';
import { normalizeDisplayName } from './user-fns.js';
import type { UserStore } from './user-store.js';
import type { User } from './user-types.js';

/** The signed-in user's profile (`GET`/`PATCH /v1/auth/me`). */
export class ProfileService {
  constructor(private readonly store: UserStore) {}

  /** The caller's profile. */
  async profile(p: Principal): Promise<User> {
    requireHuman(p, 'read a user profile');
    const user = await this.store.findById(p.userId);
    if (!user) throw new UnauthenticatedError();
    return user;
  }

  /** Changes the caller's display name and marketing preference (the fields that are set). */
  async update(p: Principal, fields: { displayName?: string; marketingEmails?: boolean }): Promise<User> {
    const user = await this.profile(p);
    const change: { displayName?: string; marketingEmails?: boolean } = {};
    if (fields.displayName !== undefined) change.displayName = normalizeDisplayName(fields.displayName);
    if (fields.marketingEmails !== undefined) change.marketingEmails = fields.marketingEmails;
    if (Object.keys(change).length > 0) await this.store.updateProfile(user.id, change);
    return (await this.store.findById(user.id))!;
  }
}
