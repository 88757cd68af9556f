/** Recipient types of a share (the reference's CreateShareRequest). */
export const RECIPIENT_TYPES = ['creator', 'external_email', 'user', 'agent', 'anyone_with_link'] as const;
export type RecipientType = (typeof RECIPIENT_TYPES)[number];

/** A share as a caller asks for it (unchecked; see `checkShareInput`). */
export interface ShareRequest {
  recipientType: string;
  /** The user or agent (`user`, `agent` shares only). */
  recipientId?: string | undefined;
  /** The address (`external_email` shares only). */
  email?: string | undefined;
  /** RFC 3339. */
  expiresAt: string;
  /** Absent: 1 (a one-time link). */
  maxAccessCount?: number | undefined;
  passphrase?: string | undefined;
  /** Absent or empty: any address. */
  ipAllowlist?: readonly string[] | undefined;
}

/** A checked share. */
export interface ShareInput {
  recipientType: RecipientType;
  /** The named user or agent (`user`, `agent`); undefined otherwise. */
  recipientId: string | undefined;
  /** Lower-cased (`external_email`); undefined otherwise. */
  email: string | undefined;
  expiresAt: Date;
  maxAccessCount: number;
  passphrase: string | undefined;
  /** Normalised IPs and CIDRs; undefined: any address. */
  ipAllowlist: string[] | undefined;
}
