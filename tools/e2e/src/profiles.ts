// The environment profiles of the shared meshes: one mesh per profile serves every spec file that
// asks for it with sharedMesh(profile). Keep them few; a spec that needs a setting no profile has,
// or that kills, restarts or tampers with what every org shares, starts a private mesh instead.

/** The profiles a spec can ask sharedMesh() for. */
export const SHARED_PROFILES = ['default', 'strict', 'free-plan'] as const;
export type SharedProfile = (typeof SHARED_PROFILES)[number];

/** Signs in as a platform admin on every shared mesh (configured as ` PLATFORM-ADMIN@... , ops@...`). */
export const PLATFORM_ADMIN_EMAIL = 'platform-admin@example.com';

/** The Google client id the shared meshes accept ID tokens for (GOOGLE_CLIENT_IDS). */
export const GOOGLE_CLIENT_ID = 'custos-e2e.apps.googleusercontent.com';

/** The SMTP credentials the shared meshes send with. */
export const SMTP_USER = 'custos';
export const SMTP_PASSWORD = 'smtp-pass';

/** What the global setup starts for the shared meshes to use. */
export interface SharedResources {
  smtpUrl: string;
  federationKeyFile: string;
  googleJwksUrl: string;
}

/**
 * The settings of a profile, on top of the `test` profile of @custos/mesh.
 *
 * - `default`: e-mail verification off (quickUser signs up and is in), a trusted proxy on loopback
 *   (X-Forwarded-For names the client), federation with an RS256 key and the Google stand-in, and
 *   per-IP limits no test run reaches; e-mail to the shared spool, links to https://custos.test.
 * - `strict`: the services' own defaults where tests check them: e-mail verification required,
 *   no trusted proxy (X-Forwarded-For ignored), no federation key (503). Same limits and e-mail.
 * - `free-plan`: `default` with every new org on the free plan (tier caps).
 */
export function profileEnv(profile: SharedProfile, r: SharedResources): Record<string, string> {
  const common = {
    SMTP_URL: r.smtpUrl,
    // The spool speaks no STARTTLS: plaintext on loopback, as identity allows only when told.
    SMTP_ALLOW_INSECURE: 'true',
    PUBLIC_BASE_URL: 'https://custos.test',
    // Every spec of the run comes from 127.0.0.1: the limiter runs, but no run reaches it.
    RATE_LIMIT_RPS: '100000',
    RATE_LIMIT_BURST: '100000',
    // Spaces and capitals on purpose: the setting is trimmed and compared case-insensitively.
    PLATFORM_ADMIN_EMAILS: ` ${PLATFORM_ADMIN_EMAIL.toUpperCase()} , ops@example.org`,
    // Low, so that the limit can be tested; every other spec accepts its invitations at once.
    ORG_MAX_PENDING_INVITES: '3',
  };
  const federated = {
    ...common,
    EMAIL_VERIFICATION_REQUIRED: 'false',
    TRUSTED_PROXIES: '127.0.0.1/32',
    FEDERATION_RS256_PRIVATE_KEY_FILE: r.federationKeyFile,
    GOOGLE_JWKS_URL: r.googleJwksUrl,
    GOOGLE_CLIENT_IDS: `other-client,${GOOGLE_CLIENT_ID}`,
  };
  switch (profile) {
    case 'default':
      return federated;
    case 'strict':
      return common;
    case 'free-plan':
      return { ...federated, BILLING_DEFAULT_PLAN: 'free' };
  }
}
