import { type Principal, type UserPrincipal, requireHuman } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitedError,
  UnauthenticatedError,
  isUuid,
} from '@custos/service-kit';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import type { MintedAccessToken, TokenIssuer } from '../tokens/token-issuer.js';
import type { UserStore } from '../users/user-store.js';
import { API_KEY_CREATE_PURPOSE } from '../account/account-fns.js';
import type { StepUpChecker } from '../mfa/mfa-types.js';
import type { WrongSecretBucket } from '../credentials/wrong-secret-bucket.js';
import type { PersonalKeyRow, PersonalKeyStore } from './personal-key-store.js';

const PREFIX = SECRET_TOKEN_PREFIXES.personalApiKey;
const EXCHANGE_FAILED = 'invalid API key';
/** Users hold at most this many live keys. */
const MAX_KEYS = 50;

/** The public view of a key (never its secret). */
export interface ApiKeyView {
  id: string;
  name: string;
  keyPrefix: string;
  isActive: boolean;
  createdAt: Date;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
}

function view(row: PersonalKeyRow): ApiKeyView {
  const expired = row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
  return {
    id: row.id,
    name: row.name,
    keyPrefix: `${PREFIX}${row.tokenId}`,
    isActive: row.revokedAt === null && !expired,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    lastUsedAt: row.lastUsedAt,
  };
}

/**
 * Personal API keys (`csk_`): a user creates, lists and revokes them, and exchanges one for a user
 * access token whose `sid` is the key, so revoking the key ends those tokens at once.
 */
export class PersonalKeyService {
  constructor(
    private readonly store: PersonalKeyStore,
    private readonly users: Pick<UserStore, 'findById'>,
    private readonly issuer: Pick<TokenIssuer, 'userAccessToken' | 'isPlatformAdmin' | 'settings'>,
    private readonly revocations: Pick<RevocationStore, 'revokeSession'>,
    private readonly stepUp: StepUpChecker,
    private readonly wrongSecrets: Pick<WrongSecretBucket, 'count'>,
  ) {}

  private user(p: Principal): UserPrincipal {
    requireHuman(p, 'hold personal API keys');
    return p;
  }

  /** Creates a key; the secret is returned only here. */
  async create(
    p: Principal,
    name: unknown,
    expiresAt: unknown,
    credential: unknown,
  ): Promise<{ key: ApiKeyView; apiKey: string }> {
    const user = this.user(p);
    if (typeof name !== 'string' || name.trim() === '' || name.length > 100) {
      throw new InvalidArgumentError('name', 'name is required (at most 100 characters)');
    }
    let expires: Date | null = null;
    if (typeof expiresAt === 'string' && expiresAt !== '') {
      const t = Date.parse(expiresAt);
      if (Number.isNaN(t) || !/^\d{4}-\d{2}-\d{2}T/.test(expiresAt)) {
        throw new InvalidArgumentError('expires_at', 'expires_at must be an ISO 8601 date-time');
      }
      if (t <= Date.now()) throw new InvalidArgumentError('expires_at', 'expires_at must be in the future');
      expires = new Date(t);
    }
    if ((await this.store.countLive(user.userId)) >= MAX_KEYS) {
      throw new PermissionDeniedError(`at most ${MAX_KEYS} live API keys per user`, {
        type: 'resource_limit_exceeded',
      });
    }
    await this.stepUp.confirmStepUp(user, API_KEY_CREATE_PURPOSE, credential);
    const t = generateSecretToken(PREFIX);
    const row = await this.store.transaction(async (tx) => {
      const created = await this.store.insert(
        {
          tokenId: t.id,
          userId: user.userId,
          name: name.trim(),
          secretHash: t.secretHash,
          expiresAt: expires,
        },
        tx,
      );
      await audit(
        tx,
        auditOf(
          user,
          'api_key.created',
          { type: 'api_key', id: created.id },
          { expires_at: expires?.toISOString() ?? null },
        ),
      );
      return created;
    });
    return { key: view(row), apiKey: t.token };
  }

  /** The caller's keys, oldest first. */
  async list(p: Principal): Promise<ApiKeyView[]> {
    const user = this.user(p);
    return (await this.store.listForUser(user.userId)).map(view);
  }

  /** Revokes one of the caller's keys, and every token minted from it. */
  async revoke(p: Principal, keyId: string): Promise<void> {
    const user = this.user(p);
    if (!isUuid(keyId)) throw new InvalidArgumentError('key_id', 'key_id must be a UUID');
    const revoked = await this.store.transaction(async (tx) => {
      const row = await this.store.revoke(user.userId, keyId.toLowerCase(), tx);
      if (row) await audit(tx, auditOf(user, 'api_key.revoked', { type: 'api_key', id: row.id }));
      return row;
    });
    if (!revoked) throw new NotFoundError('API key', keyId);
    await this.revocations.revokeSession(
      revoked.tokenId,
      new Date(Date.now() + this.issuer.settings.userAccessTtlSeconds * 1000),
    );
  }

  /**
   * Counts a wrong secret for the key; past EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE in its minute
   * the exchange answers 429 with no record of its own (the first one over writes one
   * `auth.exchange_refusals_limited`), so a flood from many addresses cannot flood the audit log.
   */
  private async limitWrongSecrets(
    keyId: string,
    record: { orgId: string; resourceType: string; resourceId: string },
  ): Promise<void> {
    const counted = await this.wrongSecrets.count('personal_key', keyId);
    if (counted.verdict === 'audit') return;
    if (counted.verdict === 'limit') {
      await auditRefusal(this.store, {
        ...record,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.exchange_refusals_limited',
        metadata: { method: 'api_key', key_id: keyId, per_minute: counted.perMinute },
      });
    }
    throw new RateLimitedError(counted.retryAfter);
  }

  /**
   * Exchanges a key for a user access token; every refusal answers the same 401, except wrong
   * secrets past the key's per-minute limit (429, limitWrongSecrets).
   */
  async exchange(apiKey: string): Promise<MintedAccessToken> {
    const parsed = parseSecretToken(apiKey, PREFIX);
    if (!parsed) throw new UnauthenticatedError(EXCHANGE_FAILED);
    const row = await this.store.findByTokenId(parsed.id);
    if (!row) throw new UnauthenticatedError(EXCHANGE_FAILED);
    const user = await this.users.findById(row.userId);
    if (!user) throw new UnauthenticatedError(EXCHANGE_FAILED);
    // From here the key names a known user: a refusal is recorded under the user's org.
    const refusal = !secretMatches(parsed.secret, row.secretHash)
      ? 'wrong_secret'
      : row.revokedAt
        ? 'key_revoked'
        : row.expiresAt && row.expiresAt.getTime() <= Date.now()
          ? 'key_expired'
          : undefined;
    const record = {
      orgId: user.orgId,
      resourceType: 'user',
      resourceId: user.id,
    };
    if (refusal === 'wrong_secret') await this.limitWrongSecrets(row.id, record);
    if (refusal) {
      await auditRefusal(this.store, {
        ...record,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.login_failed',
        metadata: { method: 'api_key', key_id: row.id, reason: refusal },
      });
      throw new UnauthenticatedError(EXCHANGE_FAILED);
    }
    // A token never outlives its key.
    const ttl = row.expiresAt
      ? Math.max(1, Math.floor((row.expiresAt.getTime() - Date.now()) / 1000))
      : undefined;
    const minted = this.issuer.userAccessToken(
      { ...user, platformAdmin: this.issuer.isPlatformAdmin(user) },
      { id: row.tokenId, amr: ['api_key'] },
      ttl,
    );
    // Handed out only once the sign-in and its audit record are committed, and only if the key is
    // still live in that transaction: a reset or revocation that committed since the read above
    // (or is committing now) wins, and the exchange is refused like any revoked key.
    const signedIn = await this.store.transaction(async (tx) => {
      if (!(await this.store.touch(row.id, tx))) return false;
      await audit(tx, {
        ...record,
        actorType: 'user',
        actorId: user.id,
        action: 'auth.login',
        metadata: { method: 'api_key', key_id: row.id },
      });
      return true;
    });
    if (!signedIn) {
      await auditRefusal(this.store, {
        ...record,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.login_failed',
        metadata: { method: 'api_key', key_id: row.id, reason: 'key_revoked' },
      });
      throw new UnauthenticatedError(EXCHANGE_FAILED);
    }
    return minted;
  }
}
