import { InvalidArgumentError } from '@custos/service-kit';
import type { OrgRole } from '../users/user-types.js';

/** An invitation works for 7 days. */
export const INVITE_TTL_SECONDS = 7 * 86_400;

/** The roles an invitation can grant: owners are made by an owner, from existing members. */
export const INVITABLE_ROLES = ['member', 'admin'] as const;

/** The role of an invitation: `member` when absent or empty, `admin`, else a 400 naming `role`. */
export function parseInviteRole(raw: unknown): OrgRole {
  if (raw === undefined || raw === null || raw === '') return 'member';
  if (typeof raw !== 'string' || !(INVITABLE_ROLES as readonly string[]).includes(raw)) {
    throw new InvalidArgumentError('role', `role must be one of ${INVITABLE_ROLES.join(', ')}`);
  }
  return raw as OrgRole;
}

/** What the invitation e-mail calls the inviter: the display name, else the e-mail address. */
export function inviterName(user: { displayName: string; email: string }): string {
  return user.displayName.trim() || user.email;
}
