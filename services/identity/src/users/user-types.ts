/** Roles in an org, most powerful first. */
export const ORG_ROLES = ['owner', 'admin', 'member'] as const;
/** One of ORG_ROLES. */
export type OrgRole = (typeof ORG_ROLES)[number];

/** A user as the identity service's rules see it. */
export interface User {
  id: string;
  email: string;
  displayName: string;
  passwordHash: string | null;
  authMethod: string;
  emailVerified: boolean;
  marketingEmails: boolean;
  totpEnabled: boolean;
  /** Secret reads need a passkey unlock token (`X-Passkey-Token`); carried as the `pkv` claim. */
  requirePasskeyForVaults: boolean;
  /** Stored platform admin: the first account of an install (SIGNUP_MODE), besides PLATFORM_ADMIN_EMAILS. */
  platformAdmin?: boolean;
  orgId: string;
  role: OrgRole;
  createdAt: Date;
}

/** The tokens of one sign-in, as the API returns them. */
export interface TokenSetView {
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  refreshToken: string;
}
