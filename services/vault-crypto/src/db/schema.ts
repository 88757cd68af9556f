import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  customType,
  index,
  integer,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

/** The Postgres schema the vault-crypto service owns; no other service reads it. */
export const SCHEMA = 'vault_crypto';
export const vaultCryptoSchema = pgSchema(SCHEMA);

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });
const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Domain events waiting for the relay. */
export const outbox = outboxTable(vaultCryptoSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(vaultCryptoSchema);

/**
 * Versions of each org's key-encryption key. The key itself is random and stored only wrapped by
 * the KMS provider; versions are never deleted, so no data key is ever stranded by a rotation.
 */
export const orgKeys = vaultCryptoSchema.table(
  'org_keys',
  {
    orgId: uuid('org_id').notNull(),
    version: integer('version').notNull(),
    /** The KEK wrapped by the KMS provider (its own format). */
    wrappedKey: bytea('wrapped_key').notNull(),
    /** Which provider wrapped it (`local`, `aws-kms`, `pkcs11`). */
    provider: text('provider').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.version] })],
);

/** Vaults. Names are unique per org among live vaults; `__agent-keys`/`__treasury-keys` are system vaults. */
export const vaults = vaultCryptoSchema.table(
  'vaults',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id').notNull(),
    name: text('name').notNull(),
    description: text('description').notNull().default(''),
    createdBy: uuid('created_by').notNull(),
    createdByType: text('created_by_type').notNull(),
    isSystem: boolean('is_system').notNull().default(false),
    createdAt: tstz('created_at').notNull().defaultNow(),
    deletedAt: tstz('deleted_at'),
  },
  (t) => [
    uniqueIndex('vaults_org_name_live')
      .on(t.orgId, t.name)
      .where(sql`${t.deletedAt} IS NULL`),
    index('vaults_org').on(t.orgId),
  ],
);

/**
 * Secret versions, envelope-encrypted: the value under a per-version data key (AES-256-GCM, AAD
 * binding vault, path and version), the data key wrapped by the org KEK version `kek_version`.
 */
export const secretVersions = vaultCryptoSchema.table(
  'secret_versions',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    vaultId: uuid('vault_id').notNull(),
    orgId: uuid('org_id').notNull(),
    path: text('path').notNull(),
    version: integer('version').notNull(),
    type: text('type').notNull(),
    ciphertext: bytea('ciphertext').notNull(),
    iv: bytea('iv').notNull(),
    tag: bytea('tag').notNull(),
    wrappedDataKey: bytea('wrapped_data_key').notNull(),
    kekVersion: integer('kek_version').notNull(),
    metadata: jsonb('metadata'),
    expiresAt: tstz('expires_at'),
    maxAccessCount: bigint('max_access_count', { mode: 'number' }),
    accessCount: bigint('access_count', { mode: 'number' }).notNull().default(0),
    isDisabled: boolean('is_disabled').notNull().default(false),
    rotationPolicy: jsonb('rotation_policy'),
    createdBy: uuid('created_by').notNull(),
    createdByType: text('created_by_type').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    deletedAt: tstz('deleted_at'),
  },
  (t) => [
    uniqueIndex('secret_versions_path_version').on(t.vaultId, t.path, t.version),
    index('secret_versions_live_path')
      .on(t.vaultId, t.path, t.version.desc())
      .where(sql`${t.deletedAt} IS NULL`),
    index('secret_versions_org_live')
      .on(t.orgId)
      .where(sql`${t.deletedAt} IS NULL`),
  ],
);

/**
 * Shares of one secret version (SPEC §4.6): a link or a grant to a recipient, bounded by an
 * expiry and an access count, optionally by a passphrase (scrypt hash) and an IP allowlist.
 */
export const shares = vaultCryptoSchema.table(
  'shares',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id').notNull(),
    /** The shared version: a share pins the version it was created from. */
    secretVersionId: uuid('secret_version_id').notNull(),
    vaultId: uuid('vault_id').notNull(),
    path: text('path').notNull(),
    createdBy: uuid('created_by').notNull(),
    createdByType: text('created_by_type').notNull(),
    /** `creator`, `external_email`, `user`, `agent` or `anyone_with_link`. */
    recipientType: text('recipient_type').notNull(),
    /** The recipient user (creator, user) or agent (agent); null for e-mail and link shares. */
    recipientId: uuid('recipient_id'),
    recipientEmail: text('recipient_email'),
    /**
     * SHA-256 of the link secret (256 random bits the link carries beside the id); the secret itself
     * is never stored. Null: a share made before link secrets, which no longer opens.
     */
    secretHash: bytea('secret_hash'),
    /**
     * SHA-256 of the e-mailed link's secret (an external-e-mail share): issued to identity when it
     * mails the link, replaced when it mails again; null until then. The creator's link (above)
     * stays as it is.
     */
    mailSecretHash: bytea('mail_secret_hash'),
    passphraseHash: text('passphrase_hash'),
    /** IPs and CIDRs the share opens from; null: any address. */
    ipAllowlist: jsonb('ip_allowlist').$type<string[]>(),
    expiresAt: tstz('expires_at').notNull(),
    maxAccessCount: integer('max_access_count').notNull(),
    accessCount: integer('access_count').notNull().default(0),
    /** Wrong passphrases so far, plus checks in flight (each reserves a slot before verifying). */
    passphraseAttempts: integer('passphrase_attempts').notNull().default(0),
    acceptedAt: tstz('accepted_at'),
    declinedAt: tstz('declined_at'),
    revokedAt: tstz('revoked_at'),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [
    index('shares_org_created').on(t.orgId, t.createdAt),
    index('shares_creator').on(t.createdBy, t.createdAt),
    index('shares_recipient')
      .on(t.recipientId)
      .where(sql`${t.recipientId} IS NOT NULL`),
  ],
);
