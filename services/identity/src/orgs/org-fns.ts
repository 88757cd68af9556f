import {
  ConflictError,
  type CustosError,
  InvalidArgumentError,
  PermissionDeniedError,
  isUuid,
} from '@custos/service-kit';
import { ORG_ROLES, type OrgRole } from '../users/user-types.js';

/** A UUID path or body value, lower-cased, or a 400 naming `field`. */
export function parseUuid(raw: unknown, field: string): string {
  if (typeof raw !== 'string' || !isUuid(raw))
    throw new InvalidArgumentError(field, `${field} must be a UUID`);
  return raw.toLowerCase();
}

/** One of the org roles, or a 400 naming `role`. */
export function parseRole(raw: unknown): OrgRole {
  if (typeof raw !== 'string' || raw === '') throw new InvalidArgumentError('role', 'role is required');
  if (!(ORG_ROLES as readonly string[]).includes(raw)) {
    throw new InvalidArgumentError('role', `role must be one of ${ORG_ROLES.join(', ')}`);
  }
  return raw as OrgRole;
}

/** Who acts on whom, as the rules of PATCH and DELETE /v1/org/members/{user_id} need it. */
export interface MemberChange {
  /** The caller's current role (read from the database, not from the token). */
  callerRole: OrgRole;
  /** Whether the caller acts on their own membership. */
  self: boolean;
  /** The target's current role. */
  targetRole: OrgRole;
  /** Owners of the org right now (the target included when an owner). */
  ownerCount: number;
}

const ONLY_MANAGERS = 'only an org owner or admin can manage members';

/**
 * Why a role change is refused, or undefined when it is allowed: members change nobody; admins
 * neither touch owners nor make anyone an owner; the last owner cannot be demoted (409).
 */
export function roleChangeRefusal(c: MemberChange, newRole: OrgRole): CustosError | undefined {
  if (c.callerRole === 'member') return new PermissionDeniedError(ONLY_MANAGERS);
  if (c.callerRole === 'admin' && c.targetRole === 'owner') {
    return new PermissionDeniedError("an admin cannot change an owner's role");
  }
  if (c.callerRole === 'admin' && newRole === 'owner') {
    return new PermissionDeniedError('only an owner can make a member an owner');
  }
  if (c.targetRole === 'owner' && newRole !== 'owner' && c.ownerCount <= 1) {
    return new ConflictError('the last owner of an org cannot be demoted; make another member owner first');
  }
  return undefined;
}

/**
 * Why removing a member is refused, or undefined when it is allowed: the same protections as a
 * role change, and nobody removes themselves here (that is account deletion, DELETE /v1/auth/me).
 */
export function removalRefusal(c: MemberChange): CustosError | undefined {
  if (c.callerRole === 'member') return new PermissionDeniedError(ONLY_MANAGERS);
  if (c.self) {
    return new PermissionDeniedError(
      'you cannot remove yourself; delete your account with DELETE /v1/auth/me instead',
    );
  }
  if (c.callerRole === 'admin' && c.targetRole === 'owner') {
    return new PermissionDeniedError('an admin cannot remove an owner');
  }
  if (c.targetRole === 'owner' && c.ownerCount <= 1) {
    return new ConflictError('the last owner of an org cannot be removed');
  }
  return undefined;
}

/** The name of a sub-org: trimmed, 1 to 128 printable characters, or a 400 naming `name`. */
export function normalizeOrgName(raw: unknown): string {
  if (typeof raw !== 'string' || raw.trim() === '')
    throw new InvalidArgumentError('name', 'name is required');
  const name = raw.trim();
  // eslint-disable-next-line no-control-regex
  if (name.length > 128 || /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(name)) {
    throw new InvalidArgumentError('name', 'name must be at most 128 printable characters');
  }
  return name;
}

/**
 * The e-mail a deleted user keeps: unique (it names the user id), undeliverable (`.invalid`, RFC
 * 2606), and never equal to a real address, so the real one can sign up again. Same form as
 * account deletion's (`deleted+<uuid>@invalid`).
 */
export function tombstoneEmail(userId: string): string {
  return `deleted+${userId}@invalid`;
}

/**
 * Milliseconds from `nowMs` until a token minted then is no longer covered by a subject revocation
 * made at `revokedAtMs`: revocations are kept in whole seconds rounded up, and `iat` is in whole
 * seconds, so a token minted later within the same second would still be refused.
 */
export function msUntilPastRevocation(revokedAtMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil(revokedAtMs / 1000) * 1000 - nowMs);
}
