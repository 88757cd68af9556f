import type { RevocationStore } from '../tokens/revocation-store.js';
import { msUntilPastRevocation } from './account-fns.js';
import type { AccountStore } from './account-store.js';

/** A subject revocation must outlive every token it covers; agent tokens live at most a day. */
const REVOCATION_TTL_MS = 86_400_000;

/**
 * Ends every session and access token of a user: refresh tokens are marked revoked and every token
 * of `user:<id>` issued until now is revoked in Postgres and Redis. Call it after the transaction
 * that changed the credential. Returns the instant of the revocation.
 */
export async function revokeUserEverywhere(
  store: AccountStore,
  revocations: RevocationStore,
  userId: string,
): Promise<number> {
  const now = Date.now();
  await revocations.revokeSubjectBefore(`user:${userId}`, new Date(now), new Date(now + REVOCATION_TTL_MS));
  // Again after the revocation: a refresh rotation that was in flight when the caller's transaction
  // revoked the family may have inserted its successor since.
  await store.revokeRefreshTokens(userId);
  return now;
}

/**
 * Waits until a sign-in would mint a token that the revocation made at `revokedAtMs` does not
 * cover (at most a second), so that signing in right after the answer works.
 */
export async function waitPastRevocation(revokedAtMs: number): Promise<void> {
  const ms = msUntilPastRevocation(revokedAtMs, Date.now());
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
}
