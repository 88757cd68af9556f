import { type Principal, actorOf } from '@custos/auth';
import {
  InvalidArgumentError,
  formatNetwork,
  networkContains,
  parseNetwork,
  isUuid,
} from '@custos/service-kit';
import { futureTime } from '../secrets/secret-fns.js';
import type { SecretRow } from '../secrets/secret-store.js';
import { RECIPIENT_TYPES, type RecipientType, type ShareInput, type ShareRequest } from './share-types.js';

/** Recipient types only a human may create: the value leaves the org's principals (SPEC §4.6). */
export const HUMAN_ONLY_RECIPIENTS: ReadonlySet<RecipientType> = new Set([
  'external_email',
  'anyone_with_link',
]);

/** The furthest a share's `expires_at` may lie in the future. */
export const MAX_SHARE_TTL_MS = 30 * 86_400_000;
/** The most opens a share may allow. */
export const MAX_SHARE_ACCESS_COUNT = 1000;
/** Opens a share allows when the body names no `max_access_count`: a one-time link. */
export const DEFAULT_SHARE_ACCESS_COUNT = 1;
/** Wrong passphrases a share tolerates before it is locked for good. */
export const MAX_PASSPHRASE_ATTEMPTS = 5;
/** Share creations allowed per org in any 60 seconds (DECISIONS.md: rate limits). */
export const SHARE_CREATIONS_PER_MINUTE = 10;
const PASSPHRASE_MIN = 8;
const PASSPHRASE_MAX = 256;
const MAX_ALLOWLIST = 100;
const EMAIL =
  /^[^\s@"<>()[\]\\,;:]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/;

/** An e-mail address as stored: trimmed, lower-cased, at most 254 characters. */
export function shareEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (email.length === 0 || email.length > 254 || !EMAIL.test(email)) {
    throw new InvalidArgumentError('email', 'email must be an e-mail address');
  }
  return email;
}

/**
 * One allowlist entry as stored: an IPv4/IPv6 address, or a CIDR (address/prefix length), in the
 * canonical form of service-kit's cidr (host bits cleared; a single host without its prefix).
 * Throws a 400 naming `ip_allowlist`.
 */
export function allowlistEntry(raw: string, index: number): string {
  const network = raw.length <= 64 ? parseNetwork(raw.trim()) : undefined;
  if (!network) {
    throw new InvalidArgumentError('ip_allowlist', `ip_allowlist[${index}] must be an IP address or a CIDR`);
  }
  const text = formatNetwork(network);
  const host = `/${network.bytes.length * 8}`;
  return text.endsWith(host) ? text.slice(0, -host.length) : text;
}

/** An allowlist of 1 to 100 entries, normalised; absent or empty means any address. */
export function checkIpAllowlist(raw: readonly string[] | undefined): string[] | undefined {
  if (raw === undefined || raw.length === 0) return undefined;
  if (raw.length > MAX_ALLOWLIST) {
    throw new InvalidArgumentError(
      'ip_allowlist',
      `ip_allowlist must be an array of 1 to ${MAX_ALLOWLIST} IP addresses or CIDRs`,
    );
  }
  return [...new Set(raw.map((e, i) => allowlistEntry(e, i)))];
}

/** Whether `ip` (the client address the gateway resolved) falls inside the allowlist. */
export function ipAllowed(allowlist: readonly string[], ip: string | undefined): boolean {
  if (!ip) return false;
  return allowlist.some((entry) => {
    const network = parseNetwork(entry);
    return network !== undefined && networkContains(network, ip);
  });
}

/**
 * Checks a share, naming the first refused field: `recipient_type`, `recipient_id` (a UUID for
 * `user`/`agent` shares, refused otherwise), `email` (for `external_email` shares only), `expires_at`
 * (in the future, at most 30 days ahead), `max_access_count` (1..1000, default 1), `passphrase`
 * (8..256 characters), `ip_allowlist` (normalised).
 */
export function checkShareInput(r: ShareRequest, now: Date): ShareInput {
  if (!(RECIPIENT_TYPES as readonly string[]).includes(r.recipientType)) {
    throw new InvalidArgumentError(
      'recipient_type',
      `recipient_type must be one of ${RECIPIENT_TYPES.join(', ')}`,
    );
  }
  const recipientType = r.recipientType as RecipientType;

  let recipientId: string | undefined;
  if (recipientType === 'user' || recipientType === 'agent') {
    if (r.recipientId === undefined || !isUuid(r.recipientId)) {
      throw new InvalidArgumentError('recipient_id', `recipient_id must be the UUID of the ${recipientType}`);
    }
    recipientId = r.recipientId.toLowerCase();
  } else if (r.recipientId !== undefined) {
    throw new InvalidArgumentError('recipient_id', `recipient_id is only for user and agent shares`);
  }

  let email: string | undefined;
  if (recipientType === 'external_email') {
    if (r.email === undefined)
      throw new InvalidArgumentError('email', 'email is required for external_email shares');
    email = shareEmail(r.email);
  } else if (r.email !== undefined) {
    throw new InvalidArgumentError('email', 'email is only for external_email shares');
  }

  const expiresAt = futureTime(r.expiresAt || undefined, 'expires_at', now);
  if (!expiresAt) throw new InvalidArgumentError('expires_at', 'expires_at is required');
  if (expiresAt.getTime() > now.getTime() + MAX_SHARE_TTL_MS) {
    throw new InvalidArgumentError('expires_at', 'expires_at must be at most 30 days ahead');
  }

  const mac = r.maxAccessCount ?? DEFAULT_SHARE_ACCESS_COUNT;
  if (!Number.isInteger(mac) || mac < 1 || mac > MAX_SHARE_ACCESS_COUNT) {
    throw new InvalidArgumentError(
      'max_access_count',
      `max_access_count must be an integer from 1 to ${MAX_SHARE_ACCESS_COUNT}`,
    );
  }

  let passphrase: string | undefined;
  if (r.passphrase !== undefined) {
    const length = [...r.passphrase].length;
    if (length < PASSPHRASE_MIN || length > PASSPHRASE_MAX) {
      throw new InvalidArgumentError(
        'passphrase',
        `passphrase must be a string of ${PASSPHRASE_MIN} to ${PASSPHRASE_MAX} characters`,
      );
    }
    passphrase = r.passphrase;
  }

  return {
    recipientType,
    recipientId,
    email,
    expiresAt,
    maxAccessCount: mac,
    passphrase,
    ipAllowlist: checkIpAllowlist(r.ipAllowlist),
  };
}

/** What a share is, as far as opening it goes. */
export type ShareState = 'open' | 'revoked' | 'declined' | 'expired' | 'exhausted' | 'locked';

/** The state of a share at `now` (the store re-checks all but `locked` in the statement that counts). */
export function shareState(
  s: {
    revokedAt: Date | null;
    declinedAt: Date | null;
    expiresAt: Date;
    accessCount: number;
    maxAccessCount: number;
    passphraseHash: string | null;
    passphraseAttempts: number;
  },
  now: Date,
): ShareState {
  if (s.revokedAt) return 'revoked';
  if (s.declinedAt) return 'declined';
  if (s.expiresAt.getTime() <= now.getTime()) return 'expired';
  if (s.accessCount >= s.maxAccessCount) return 'exhausted';
  if (s.passphraseHash && s.passphraseAttempts >= MAX_PASSPHRASE_ATTEMPTS) return 'locked';
  return 'open';
}

/** The detail of the 410 a share in `state` answers with. */
export function goneDetail(state: Exclude<ShareState, 'open'>): string {
  switch (state) {
    case 'revoked':
      return 'this share was revoked';
    case 'declined':
      return 'this share was declined by its recipient';
    case 'expired':
      return 'this share has expired';
    case 'exhausted':
      return 'this share has reached its max_access_count';
    case 'locked':
      return `this share is locked after ${MAX_PASSPHRASE_ATTEMPTS} wrong passphrases`;
  }
}

/** Seconds until the oldest creation in the window leaves it (at least 1). */
export function retryAfterSeconds(oldest: Date, now: Date, windowMs = 60_000): number {
  return Math.max(1, Math.ceil((oldest.getTime() + windowMs - now.getTime()) / 1000));
}

/** The kind of principal a recipient type names. */
export function recipientKind(s: { recipientType: string }): 'user' | 'agent' | undefined {
  if (s.recipientType === 'user' || s.recipientType === 'creator') return 'user';
  if (s.recipientType === 'agent') return 'agent';
  return undefined;
}

/** Whether the principal is the share's named recipient. */
export function isRecipient(
  p: Principal,
  s: { orgId: string; recipientType: string; recipientId: string | null },
): boolean {
  const a = actorOf(p);
  return p.orgId === s.orgId && recipientKind(s) === a.actorType && s.recipientId === a.actorId;
}

/** Whether a secret version can still be read at `now` (live, enabled, unexpired, not exhausted). */
export function versionReadable(row: SecretRow | undefined, now: Date): row is SecretRow {
  return (
    !!row &&
    row.deletedAt === null &&
    !row.isDisabled &&
    (row.expiresAt === null || row.expiresAt.getTime() > now.getTime()) &&
    (row.maxAccessCount === null || row.accessCount < row.maxAccessCount)
  );
}
