// values.schema.json turns a typo or a wrong type into a failed install instead of a silently
// ignored value; the chart's own checks refuse an install with no database, Redis, token-signing
// KEK or SMTP server configured.
import { DATABASE_SERVICES } from './facts';
import { REQUIRED_SETS, chartDir, renderChart, runHelm } from './helm';

/** `helm template` with the required values, then `sets` (later --set wins). */
function template(...sets: string[]) {
  return runHelm(['template', 'custos', chartDir, ...REQUIRED_SETS, ...sets.flatMap((s) => ['--set', s])]);
}

describe('values.schema.json', () => {
  it.each([
    ['a misspelt service', 'services.gatway.replicas=2', /gatway/],
    ['a misspelt service setting', 'services.vault-crypto.replcas=2', /replcas/],
    ['a misspelt top-level key', 'ingres.enabled=true', /ingres/],
    ['a misspelt nested key', 'ingress.tls.enabeld=true', /enabeld/],
    ['a string where a number belongs', 'services.signer.replicas=three', /replicas/],
    ['an unknown log level', 'logLevel=verbose', /logLevel/],
    ['an unknown KMS provider', 'kms.provider=vault', /provider/],
    [
      'a caller that is not a service',
      'services.identity.allowedCallers={gateway,auditor}',
      /allowedCallers/,
    ],
    ['a non-Postgres owner URL', 'postgres.migrationUrl=mysql://db/custos', /migrationUrl/],
    ['a master key that is not base64 of 32 bytes', 'kms.localMasterKey=c2hvcnQ=', /localMasterKey/],
    ['a non-string env value', 'services.audit.env.FOO=1', /FOO|env/],
    ['a token-signing KEK that is too short', 'tokens.signingKek=c2hvcnQ=', /signingKek/],
    [
      'a token-signing KEK of 33 bytes',
      `tokens.signingKek=${Buffer.alloc(33, 1).toString('base64')}`,
      /signingKek/,
    ],
    [
      'a token-signing KEK that is not canonical base64',
      // 44 characters, but the last one before "=" carries bits beyond the 32 bytes.
      `tokens.signingKek=${'A'.repeat(42)}B=`,
      /signingKek/,
    ],
    ['a token-signing KEK that is not base64 at all', `tokens.signingKek=${'-'.repeat(43)}=`, /signingKek/],
    ['a misspelt tokens key', 'tokens.signingKEK=x', /signingKEK/],
    ['a misspelt mail key', 'mail.smtpURL=smtp://mail:25', /smtpURL/],
    ['a non-SMTP mail URL', 'mail.smtpUrl=http://mail:25', /smtpUrl/],
    ['an issuer that is not an http(s) URL', 'tokens.issuer=custos.example.com', /issuer/],
    ['an access token TTL below a minute', 'tokens.accessTokenTtlSeconds=30', /accessTokenTtlSeconds/],
    ['a legacy issuer with a comma', 'tokens.legacyIssuers[0]=https://a\\,b', /legacyIssuers/],
    ['email verification as a word', 'auth.emailVerificationRequired=maybe', /emailVerificationRequired/],
    ['a webhook secret key that is too short', 'webhooks.secretKey=c2hvcnQ=', /secretKey/],
    ['a misspelt webhooks key', 'webhooks.allowedCIDRs={10.0.0.0/8}', /allowedCIDRs/],
    ['a webhook allowed CIDR that is not a network', 'webhooks.allowedCidrs={intranet}', /allowedCidrs/],
    ['webhook plain HTTP as a word', 'webhooks.allowHttp=sometimes', /allowHttp/],
  ])('rejects %s (%s)', (_label, set, mentions) => {
    const { status, stderr } = template(set);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/schema/);
    expect(stderr).toMatch(mentions);
  });

  it('accepts valid overrides and applies them', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'services.signer.replicas=4',
      '--set-string',
      'services.audit.env.FEATURE_X=on',
      '--set',
      'services.vault-crypto.secretEnv.EXTRA_TOKEN.name=extra',
      '--set',
      'services.vault-crypto.secretEnv.EXTRA_TOKEN.key=token',
    ]);
    const deployment = (name: string) =>
      objects.find((o) => o.kind === 'Deployment' && o.metadata.name === `custos-${name}`)!;
    expect(deployment('signer').spec.replicas).toBe(4);
    expect(deployment('audit').spec.template.spec.containers[0].env).toContainEqual({
      name: 'FEATURE_X',
      value: 'on',
    });
    expect(deployment('vault-crypto').spec.template.spec.containers[0].env).toContainEqual({
      name: 'EXTRA_TOKEN',
      valueFrom: { secretKeyRef: { name: 'extra', key: 'token' } },
    });
  });
});

describe('dependency checks', () => {
  it('refuses to render without the schema owner’s Postgres URL for the migration Job', () => {
    // The services' own credentials from Secrets, so that only the owner is missing.
    const { status, stderr } = template(
      'postgres.migrationUrl=',
      'postgres.migrationExistingSecret=',
      ...DATABASE_SERVICES.map((s) => `postgres.serviceCredentials.${s}.existingSecret=custos-${s}-db`),
    );
    expect(status).not.toBe(0);
    expect(stderr).toContain(
      "postgres: the migration Job needs the schema owner's URL: set postgres.migrationExistingSecret (recommended) or postgres.migrationUrl",
    );
  });

  it('refuses to render a service without its Redis credentials, naming the values', () => {
    const { status, stderr } = template('redis.users.billing.password=');
    expect(status).not.toBe(0);
    expect(stderr).toContain(
      "redis: billing needs its own Redis user's credentials: set redis.users.billing.existingSecret (a Secret with its REDIS_URL, recommended) or redis.users.billing.password",
    );
  });

  it('refuses to render without a token-signing KEK, saying how to give one', () => {
    const { status, stderr } = template('tokens.signingKek=', 'tokens.existingSecret=');
    expect(status).not.toBe(0);
    expect(stderr).toContain(
      'tokens: identity needs TOKEN_SIGNING_KEK: set tokens.existingSecret (recommended) or tokens.signingKek',
    );
    expect(stderr).toContain('openssl rand -base64 32');
  });

  it('refuses to render without an SMTP server, saying how to give one', () => {
    const { status, stderr } = template('mail.smtpUrl=', 'mail.existingSecret=');
    expect(status).not.toBe(0);
    expect(stderr).toContain(
      'mail: identity needs SMTP_URL to send e-mail: set mail.existingSecret (recommended) or mail.smtpUrl',
    );
  });

  it('the default values alone do not render: the KEK and SMTP URL have no default', () => {
    const { status, stderr } = runHelm(['template', 'custos', chartDir]);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/TOKEN_SIGNING_KEK|SMTP_URL|AUDIT_HMAC_KEY|WEBHOOK_SECRET_KEY/);
  });

  it('accepts both from services.identity.secretEnv instead', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'tokens.signingKek=',
      '--set',
      'mail.smtpUrl=',
      '--set',
      'services.identity.secretEnv.TOKEN_SIGNING_KEK.name=own-kek',
      '--set',
      'services.identity.secretEnv.TOKEN_SIGNING_KEK.key=kek',
      '--set',
      'services.identity.secretEnv.SMTP_URL.name=own-smtp',
      '--set',
      'services.identity.secretEnv.SMTP_URL.key=url',
    ]);
    const identity = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'custos-identity')!;
    const env = identity.spec.template.spec.containers[0].env;
    expect(env).toContainEqual({
      name: 'TOKEN_SIGNING_KEK',
      valueFrom: { secretKeyRef: { name: 'own-kek', key: 'kek' } },
    });
    expect(env).toContainEqual({
      name: 'SMTP_URL',
      valueFrom: { secretKeyRef: { name: 'own-smtp', key: 'url' } },
    });
  });
});
