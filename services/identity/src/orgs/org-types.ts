import type { OrgRole } from '../users/user-types.js';

/** A member of an org as the org rules and the API see it. */
export interface OrgMemberView {
  id: string;
  email: string;
  displayName: string;
  role: OrgRole;
  authMethod: string;
  /** When the user joined the org. */
  createdAt: Date;
}

/** An org under another org. */
export interface SubOrgView {
  id: string;
  name: string;
  parentOrgId: string;
  createdAt: Date;
}

/** A user as the platform admin sees it. */
export interface AdminUserView {
  id: string;
  email: string;
  displayName: string;
  role: OrgRole;
  authMethod: string;
  orgId: string;
  orgName: string;
  createdAt: Date;
  platformAdmin: boolean;
}

/** One platform setting. */
export interface AdminSettingView {
  name: string;
  value: string;
  updatedBy: string | null;
  updatedAt: Date;
}

/** A stored invitation (its token only as a hash). */
export interface InviteRow {
  id: string;
  orgId: string;
  email: string;
  role: string;
  tokenId: string;
  secretHash: string;
  invitedBy: string;
  expiresAt: Date;
  acceptedAt: Date | null;
}
