import { type Logger, describeError } from '@custos/service-kit';
import { hashPassword, needsRehash } from '../credentials/password-fns.js';
import type { UserStore } from './user-store.js';

/**
 * After `password` matched `storedHash` (a sign-in or a re-auth): replaces a hash made with weaker
 * argon2id parameters than today's by one made with today's, unless the password changed meanwhile
 * (compare-and-set on the old hash). Never throws: a failure is logged, the old hash still works
 * and the next check tries again. Does nothing for a hash that is current.
 */
export async function upgradePasswordHash(
  store: Pick<UserStore, 'replacePasswordHash'>,
  logger: Logger,
  userId: string,
  storedHash: string,
  password: string,
): Promise<void> {
  if (!needsRehash(storedHash)) return;
  try {
    const replaced = await store.replacePasswordHash(userId, storedHash, await hashPassword(password));
    if (replaced)
      logger.info({ user_id: userId }, 'password hash upgraded to the current argon2id parameters');
  } catch (err) {
    logger.warn({ user_id: userId, err: describeError(err) }, 'password hash could not be upgraded');
  }
}
