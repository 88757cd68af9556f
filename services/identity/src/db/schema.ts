import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  integer,
  customType,
  index,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

/** The Postgres schema the identity service owns; no other service reads it. */
export const SCHEMA = 'identity';
export const identitySchema = pgSchema(SCHEMA);

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });
const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Domain events waiting for the relay. */
export const outbox = outboxTable(identitySchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(identitySchema);

/** Organisations; a sub-org names its parent. */
export const orgs = identitySchema.table('orgs', {
  id: uuid('id').primaryKey().defaultRandom(),
  name: text('name').notNull(),
  parentOrgId: uuid('parent_org_id'),
  createdAt: tstz('created_at').notNull().defaultNow(),
});

/** People. E-mail is unique case-insensitively; the password hash is argon2id (PHC string). */
export const users = identitySchema.table(
  'users',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    email: text('email').notNull(),
    displayName: text('display_name').notNull().default(''),
    passwordHash: text('password_hash'),
    authMethod: text('auth_method').notNull().default('password'),
    emailVerified: boolean('email_verified').notNull().default(false),
    marketingEmails: boolean('marketing_emails').notNull().default(false),
    totpEnabled: boolean('totp_enabled').notNull().default(false),
    /** TOTP secret, AES-256-GCM under MFA_SECRET_KEY bound to the user id (format 2); set once confirmed. */
    totpSecretEnc: bytea('totp_secret_enc'),
    /** A secret being enrolled, until verify-setup confirms a code from it. */
    totpPendingSecretEnc: bytea('totp_pending_secret_enc'),
    /** The last TOTP time step accepted, so a code cannot be used twice. */
    totpLastStep: bigint('totp_last_step', { mode: 'number' }),
    requirePasskeyForVaults: boolean('require_passkey_for_vaults').notNull().default(false),
    requirePasskeyForMfa: boolean('require_passkey_for_mfa').notNull().default(false),
    platformAdmin: boolean('platform_admin').notNull().default(false),
    deletedAt: tstz('deleted_at'),
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id),
    createdAt: tstz('created_at').notNull().defaultNow(),
    updatedAt: tstz('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('users_email_lower_key').on(sql`lower(${t.email})`)],
);

/** Membership and role of a user in an org. */
export const orgMembers = identitySchema.table(
  'org_members',
  {
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    role: text('role').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.userId] }), index('org_members_user_idx').on(t.userId)],
);

/**
 * Ed25519 token-signing keys; the private half is encrypted under TOKEN_SIGNING_KEK (AAD: the kid).
 * Rows are inserted only through `identity.insert_signing_key` (migration 0006); the service's role
 * has no INSERT on the table. `revoked_at`: an operator retired the key as compromised.
 */
export const signingKeys = identitySchema.table('signing_keys', {
  kid: text('kid').primaryKey(),
  publicJwk: jsonb('public_jwk').notNull(),
  privateKeyEnc: bytea('private_key_enc').notNull(),
  createdAt: tstz('created_at').notNull().defaultNow(),
  retiredAt: tstz('retired_at'),
  revokedAt: tstz('revoked_at'),
});

/**
 * Refresh tokens, stored as hashes. Each sign-in starts a family; a refresh marks the token used
 * and issues the next one in the family; presenting a used token revokes the whole family.
 */
export const refreshTokens = identitySchema.table(
  'refresh_tokens',
  {
    id: text('id').primaryKey(),
    familyId: uuid('family_id').notNull(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    secretHash: text('secret_hash').notNull(),
    amr: jsonb('amr').$type<string[]>().notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    expiresAt: tstz('expires_at').notNull(),
    usedAt: tstz('used_at'),
    revokedAt: tstz('revoked_at'),
  },
  (t) => [index('refresh_tokens_family_idx').on(t.familyId)],
);

/** Single-use e-mailed tokens (verification, password reset, e-mail change undo), stored as hashes. */
export const emailTokens = identitySchema.table('email_tokens', {
  id: text('id').primaryKey(),
  userId: uuid('user_id')
    .notNull()
    .references(() => users.id, { onDelete: 'cascade' }),
  purpose: text('purpose').notNull(),
  secretHash: text('secret_hash').notNull(),
  expiresAt: tstz('expires_at').notNull(),
  usedAt: tstz('used_at'),
  createdAt: tstz('created_at').notNull().defaultNow(),
  /** Undo of an e-mail change (purpose `email_change_undo`): the address the change replaced. */
  restoreEmail: text('restore_email'),
});

/**
 * Revocations, the durable copy of what the gateway checks in Redis: a token id (`jti`), a session
 * (`sid`), or every token of a subject issued before a time (`sub_before`).
 */
export const revocations = identitySchema.table(
  'revocations',
  {
    kind: text('kind').notNull(),
    value: text('value').notNull(),
    /** For `sub_before`: tokens issued before this instant are revoked. */
    notBefore: tstz('not_before'),
    expiresAt: tstz('expires_at').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.value] }), index('revocations_expires_idx').on(t.expiresAt)],
);

/** Agents. Policy settings of spec §2.4 live in `settings`, validated by agents/agent-fns.ts. */
export const agents = identitySchema.table(
  'agents',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id),
    name: text('name').notNull(),
    description: text('description').notNull().default(''),
    isActive: boolean('is_active').notNull().default(true),
    settings: jsonb('settings').$type<Record<string, unknown>>().notNull(),
    createdBy: uuid('created_by').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    updatedAt: tstz('updated_at').notNull().defaultNow(),
    lastActiveAt: tstz('last_active_at'),
  },
  (t) => [index('agents_org_idx').on(t.orgId)],
);

/**
 * Applied edits of agents' guardrail fields (issue 20): who, when, the guardrail fields before and
 * after by their API names, how the edit moved them (`same`, `narrow`, `widen`, `mixed`) and the
 * approval it was applied through. Written in the transaction of the edit; never changed.
 */
export const guardrailRevisions = identitySchema.table(
  'guardrail_revisions',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id),
    agentId: uuid('agent_id')
      .notNull()
      .references(() => agents.id, { onDelete: 'cascade' }),
    actorId: uuid('actor_id').notNull(),
    change: text('change').notNull(),
    before: jsonb('before').$type<Record<string, unknown>>().notNull(),
    after: jsonb('after').$type<Record<string, unknown>>().notNull(),
    approvalId: uuid('approval_id'),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [
    index('guardrail_revisions_org_idx').on(t.orgId, t.createdAt),
    index('guardrail_revisions_agent_idx').on(t.agentId, t.createdAt),
    // An approval is used by one edit at most (approvals consumes it once; this holds it here too).
    uniqueIndex('guardrail_revisions_approval_idx').on(t.approvalId),
  ],
);

/** Agent API keys (`ocv_`), stored as hashes; a rotation revokes the previous ones. */
export const agentKeys = identitySchema.table(
  'agent_keys',
  {
    id: text('id').primaryKey(),
    agentId: uuid('agent_id')
      .notNull()
      .references(() => agents.id, { onDelete: 'cascade' }),
    secretHash: text('secret_hash').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    revokedAt: tstz('revoked_at'),
  },
  (t) => [index('agent_keys_agent_idx').on(t.agentId)],
);

/** Personal API keys (`csk_`) of users, stored as hashes. `token_id` is the key's lookup part. */
export const personalApiKeys = identitySchema.table(
  'personal_api_keys',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    tokenId: text('token_id').notNull().unique(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    secretHash: text('secret_hash').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    expiresAt: tstz('expires_at'),
    lastUsedAt: tstz('last_used_at'),
    revokedAt: tstz('revoked_at'),
  },
  (t) => [index('personal_api_keys_user_idx').on(t.userId)],
);

/** One-time MFA recovery codes (SHA-256 of the code); `used_at` marks a spent one. */
export const recoveryCodes = identitySchema.table(
  'recovery_codes',
  {
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    codeHash: text('code_hash').notNull(),
    usedAt: tstz('used_at'),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.codeHash] })],
);

/** Second-step challenges of a password login for a user with MFA (`mfa_token`, 300 s). */
export const mfaChallenges = identitySchema.table('mfa_challenges', {
  id: text('id').primaryKey(),
  userId: uuid('user_id')
    .notNull()
    .references(() => users.id, { onDelete: 'cascade' }),
  secretHash: text('secret_hash').notNull(),
  attempts: integer('attempts').notNull().default(0),
  expiresAt: tstz('expires_at').notNull(),
  usedAt: tstz('used_at'),
  createdAt: tstz('created_at').notNull().defaultNow(),
});

/** Re-auth (`rat_`) tokens: single use, bound to a purpose and a user, 300 s. */
export const reauthTokens = identitySchema.table('reauth_tokens', {
  id: text('id').primaryKey(),
  userId: uuid('user_id')
    .notNull()
    .references(() => users.id, { onDelete: 'cascade' }),
  purpose: text('purpose').notNull(),
  secretHash: text('secret_hash').notNull(),
  expiresAt: tstz('expires_at').notNull(),
  usedAt: tstz('used_at'),
  createdAt: tstz('created_at').notNull().defaultNow(),
});

/** Failed password re-auths per user, for the lockout of DECISIONS.md (10 an hour → 15 minutes). */
export const reauthFailures = identitySchema.table(
  'reauth_failures',
  {
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    failedAt: tstz('failed_at').notNull().defaultNow(),
  },
  (t) => [index('reauth_failures_user_idx').on(t.userId, t.failedAt)],
);

/** The one pending e-mail change of a user: the new address and the hash of its 6-digit code. */
export const emailChanges = identitySchema.table('email_changes', {
  userId: uuid('user_id')
    .primaryKey()
    .references(() => users.id, { onDelete: 'cascade' }),
  newEmail: text('new_email').notNull(),
  codeHash: text('code_hash').notNull(),
  attempts: integer('attempts').notNull().default(0),
  expiresAt: tstz('expires_at').notNull(),
  createdAt: tstz('created_at').notNull().defaultNow(),
});

/** Feature-quota use per fixed window (spec §8: voice_brief, 30 per hour). */
export const featureQuotaUsage = identitySchema.table(
  'feature_quota_usage',
  {
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    feature: text('feature').notNull(),
    windowStart: tstz('window_start').notNull(),
    used: integer('used').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.feature, t.windowStart] })],
);

/** Invitations to join an org with a role; accepted through the e-mailed single-use token. */
export const orgInvites = identitySchema.table(
  'org_invites',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    role: text('role').notNull(),
    tokenId: text('token_id').notNull().unique(),
    secretHash: text('secret_hash').notNull(),
    invitedBy: uuid('invited_by').notNull(),
    expiresAt: tstz('expires_at').notNull(),
    acceptedAt: tstz('accepted_at'),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [index('org_invites_org_idx').on(t.orgId)],
);

/** Platform-wide settings (`/v1/admin/settings`): string values by name. */
export const adminSettings = identitySchema.table('admin_settings', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
  updatedBy: uuid('updated_by'),
  updatedAt: tstz('updated_at').notNull().defaultNow(),
});

/**
 * Router keys (`sk-proxy-v1-`) of proxy-enabled agents, stored as hashes; `token_id` is the key's
 * lookup part and the `sid` of the 60-second tokens minted from it. Null limits mean no limit.
 */
export const routerKeys = identitySchema.table(
  'router_keys',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    tokenId: text('token_id').notNull().unique(),
    agentId: uuid('agent_id')
      .notNull()
      .references(() => agents.id, { onDelete: 'cascade' }),
    secretHash: text('secret_hash').notNull(),
    maxConcurrentStreams: integer('max_concurrent_streams'),
    spendCapMicroUsd: bigint('spend_cap_micro_usd', { mode: 'number' }),
    createdBy: uuid('created_by').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    revokedAt: tstz('revoked_at'),
  },
  (t) => [index('router_keys_agent_idx').on(t.agentId)],
);

/**
 * Failed password sign-ins of an account, whatever the client's address (one row per account that
 * has failed lately): the count in the current window, and the end of a lockout. A successful
 * sign-in or a password reset deletes the row.
 */
export const loginFailures = identitySchema.table('login_failures', {
  userId: uuid('user_id')
    .primaryKey()
    .references(() => users.id, { onDelete: 'cascade' }),
  /** Attempts counted in the window, each counted before its password is checked. */
  attempts: integer('attempts').notNull(),
  windowStartedAt: tstz('window_started_at').notNull(),
  lockedUntil: tstz('locked_until'),
});
