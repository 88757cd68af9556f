// The identity service's own environment: REDIS_URL (the gateway's Redis), TOKEN_SIGNING_KEK and
// SMTP_URL only by Secret reference, the token issuer derived from the Ingress or given, the
// optional token and e-mail settings left out when blank, and none of it given to another service.
import { SERVICES } from './facts';
import {
  type K8sObject,
  REQUIRED_SETS,
  TEST_SIGNING_KEK,
  TEST_SMTP_URL,
  named,
  objectName,
  ofKind,
  renderChart,
  scenarios,
  type Json,
} from './helm';

/** The variables only identity may get. */
const IDENTITY_ONLY = [
  'TOKEN_SIGNING_KEK',
  'MFA_SECRET_KEY',
  'SMTP_URL',
  'ACCESS_TOKEN_TTL_SECONDS',
  'REFRESH_TOKEN_TTL_SECONDS',
  'SIGNING_KEY_ROTATION_DAYS',
  'EMAIL_VERIFICATION_REQUIRED',
  'EMAIL_VERIFICATION_TTL_SECONDS',
  'MAIL_FROM',
  'PUBLIC_BASE_URL',
];

/** The container env of a service's Deployment, by name. */
function envOf(objects: K8sObject[], service: string): Map<string, Json> {
  const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

/** The value a secretKeyRef resolves to, when it names the chart's own Secret. */
function managedSecretValue(objects: K8sObject[], ref: { name: string; key: string }): string | undefined {
  const secret = ofKind(objects, 'Secret').find((s) => s.metadata.name === ref.name);
  const data = secret?.data?.[ref.key];
  return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
}

const [defaults, production] = scenarios;

describe.each([
  {
    ...defaults!,
    issuer: 'http://custos.example.com',
    kekRef: { name: 'custos-env', key: 'token-signing-kek' },
    smtpRef: { name: 'custos-env', key: 'smtp-url' },
    // Blank in values.yaml: left out, so the service's defaults apply.
    plain: {} as Record<string, string>,
  },
  {
    ...production!,
    issuer: 'https://custos.example.com',
    kekRef: { name: 'custos-tokens', key: 'token-signing-kek' },
    smtpRef: { name: 'custos-smtp', key: 'smtp-url' },
    plain: {
      ACCESS_TOKEN_TTL_SECONDS: '900',
      REFRESH_TOKEN_TTL_SECONDS: '2592000',
      SIGNING_KEY_ROTATION_DAYS: '90',
      EMAIL_VERIFICATION_REQUIRED: 'true',
      EMAIL_VERIFICATION_TTL_SECONDS: '86400',
      MAIL_FROM: 'Custos <no-reply@custos.example.com>',
    } as Record<string, string>,
  },
])('identity rendered with $label', ({ args, issuer, kekRef, smtpRef, plain }) => {
  let objects: K8sObject[];
  let identity: Map<string, Json>;
  beforeAll(() => {
    objects = renderChart(args);
    identity = envOf(objects, 'identity');
  });

  it.each(['REDIS_URL', 'TOKEN_SIGNING_KEK', 'MFA_SECRET_KEY', 'SMTP_URL'])(
    '%s comes only from a Secret reference',
    (name) => {
      const entry = identity.get(name);
      expect(entry).toBeDefined();
      expect(entry).not.toHaveProperty('value');
      expect(Object.keys(entry.valueFrom)).toEqual(['secretKeyRef']);
      expect(entry.valueFrom.secretKeyRef).toEqual({ name: expect.any(String), key: expect.any(String) });
    },
  );

  it('REDIS_URL is identity’s own (its Redis user), not the gateway’s', () => {
    expect(identity.get('REDIS_URL').valueFrom.secretKeyRef).toEqual({
      name: 'custos-identity-credentials',
      key: 'redis-url',
    });
    expect(identity.get('REDIS_URL').valueFrom).not.toEqual(
      envOf(objects, 'gateway').get('REDIS_URL').valueFrom,
    );
  });

  it('TOKEN_SIGNING_KEK and SMTP_URL name the configured Secrets', () => {
    expect(identity.get('TOKEN_SIGNING_KEK').valueFrom.secretKeyRef).toEqual(kekRef);
    expect(identity.get('SMTP_URL').valueFrom.secretKeyRef).toEqual(smtpRef);
    if (kekRef.name === 'custos-env') {
      // Given inline: the chart's Secret holds them, and the KEK decodes to 32 bytes.
      expect(managedSecretValue(objects, kekRef)).toBe(TEST_SIGNING_KEK);
      expect(Buffer.from(TEST_SIGNING_KEK, 'base64')).toHaveLength(32);
      expect(managedSecretValue(objects, smtpRef)).toBe(TEST_SMTP_URL);
    } else {
      expect(ofKind(objects, 'Secret')).toEqual([]);
    }
  });

  it('TOKEN_ISSUER is derived from the Ingress, and PUBLIC_BASE_URL follows it', () => {
    expect(identity.get('TOKEN_ISSUER')).toEqual({ name: 'TOKEN_ISSUER', value: issuer });
    expect(identity.get('PUBLIC_BASE_URL')).toEqual({ name: 'PUBLIC_BASE_URL', value: issuer });
    const ingress = ofKind(objects, 'Ingress')[0]!;
    expect(issuer).toBe(`${ingress.spec.tls ? 'https' : 'http'}://${ingress.spec.rules[0].host}`);
  });

  it('the optional token and e-mail settings are given as set, and left out when blank', () => {
    const optional = [...IDENTITY_ONLY, 'TOKEN_LEGACY_ISSUERS', 'TOKEN_AUDIENCE'].filter(
      (n) => !['TOKEN_SIGNING_KEK', 'MFA_SECRET_KEY', 'SMTP_URL', 'PUBLIC_BASE_URL'].includes(n),
    );
    const given = Object.fromEntries(
      optional.filter((n) => identity.has(n)).map((n) => [n, identity.get(n).value]),
    );
    expect(given).toEqual(plain);
  });

  it('never sets MAIL_DIR (development only) on any service', () => {
    for (const service of SERVICES)
      expect({ service, has: envOf(objects, service).has('MAIL_DIR') }).toEqual({
        service,
        has: false,
      });
  });

  it.each(SERVICES.filter((s) => s !== 'identity'))(
    '%s gets the same token issuer and audience as identity, and none of its keys or other settings',
    (service) => {
      const env = envOf(objects, service);
      expect(IDENTITY_ONLY.filter((n) => env.has(n))).toEqual([]);
      // Issuer and audience are every verifier's own configuration, the same as identity's.
      for (const n of ['TOKEN_ISSUER', 'TOKEN_LEGACY_ISSUERS', 'TOKEN_AUDIENCE'])
        expect({ n, entry: env.get(n) }).toEqual({ n, entry: identity.get(n) });
      expect(env.get('TOKEN_ISSUER')).toEqual({ name: 'TOKEN_ISSUER', value: issuer });
    },
  );

  it('REDIS_URL goes to the gateway, identity and the services that check revocations, each its own', () => {
    const withRedis = SERVICES.filter((s) => envOf(objects, s).has('REDIS_URL'));
    expect(withRedis.sort()).toEqual([
      'approvals',
      'audit',
      'billing',
      'gateway',
      'identity',
      'policy',
      'signer',
      'vault-crypto',
      'webhook-dispatcher',
    ]);
    for (const s of withRedis)
      expect(envOf(objects, s).get('REDIS_URL').valueFrom.secretKeyRef).toEqual({
        name: `custos-${s}-credentials`,
        key: 'redis-url',
      });
  });
});

describe('identity values', () => {
  const render = (...sets: string[]) => renderChart([...REQUIRED_SETS, ...sets.flatMap((s) => ['--set', s])]);
  const identityEnv = (objects: K8sObject[]) => envOf(objects, 'identity');

  it('tokens.issuer wins over the Ingress host; mail.publicBaseUrl over the issuer', () => {
    const env = identityEnv(
      render(
        'tokens.issuer=https://id.example.org',
        'ingress.tls.enabled=true',
        'mail.publicBaseUrl=https://app.example.org/',
      ),
    );
    expect(env.get('TOKEN_ISSUER').value).toBe('https://id.example.org');
    expect(env.get('PUBLIC_BASE_URL').value).toBe('https://app.example.org/');
  });

  it('with TLS on the Ingress the derived issuer is https://<host>', () => {
    const env = identityEnv(render('ingress.host=login.example.net', 'ingress.tls.enabled=true'));
    expect(env.get('TOKEN_ISSUER').value).toBe('https://login.example.net');
    expect(env.get('PUBLIC_BASE_URL').value).toBe('https://login.example.net');
  });

  it('without an Ingress and tokens.issuer, TOKEN_ISSUER and PUBLIC_BASE_URL are left to the service', () => {
    const env = identityEnv(render('ingress.enabled=false'));
    expect(env.has('TOKEN_ISSUER')).toBe(false);
    expect(env.has('PUBLIC_BASE_URL')).toBe(false);
  });

  it('plain token settings become strings, legacy issuers a comma-separated list', () => {
    const objects = render(
      'tokens.legacyIssuers={https://old.example.com,http://older.example.com}',
      'tokens.audience=custos-test',
      'tokens.accessTokenTtlSeconds=600',
      'tokens.refreshTokenTtlSeconds=31536000',
      'tokens.signingKeyRotationDays=30',
      'auth.emailVerificationRequired=false',
      'auth.emailVerificationTtlSeconds=3600',
      'mail.from=Custos <noreply@example.org>',
    );
    const env = identityEnv(objects);
    // Every verifier trusts the same issuers and audience.
    const vaultCrypto = envOf(objects, 'vault-crypto');
    expect(vaultCrypto.get('TOKEN_LEGACY_ISSUERS')?.value).toBe(
      'https://old.example.com,http://older.example.com',
    );
    expect(vaultCrypto.get('TOKEN_AUDIENCE')?.value).toBe('custos-test');
    expect(vaultCrypto.has('ACCESS_TOKEN_TTL_SECONDS')).toBe(false);
    expect(Object.fromEntries([...env.entries()].map(([k, e]) => [k, e.value]))).toMatchObject({
      TOKEN_LEGACY_ISSUERS: 'https://old.example.com,http://older.example.com',
      TOKEN_AUDIENCE: 'custos-test',
      ACCESS_TOKEN_TTL_SECONDS: '600',
      REFRESH_TOKEN_TTL_SECONDS: '31536000',
      SIGNING_KEY_ROTATION_DAYS: '30',
      EMAIL_VERIFICATION_REQUIRED: 'false',
      EMAIL_VERIFICATION_TTL_SECONDS: '3600',
      MAIL_FROM: 'Custos <noreply@example.org>',
    });
  });

  it('existingSecret wins over the inline KEK and SMTP URL, which then stay out of the chart’s Secret', () => {
    const objects = render(
      'tokens.existingSecret=my-tokens',
      'tokens.existingSecretKey=kek',
      'mail.existingSecret=my-smtp',
    );
    const env = identityEnv(objects);
    expect(env.get('TOKEN_SIGNING_KEK').valueFrom.secretKeyRef).toEqual({ name: 'my-tokens', key: 'kek' });
    expect(env.get('SMTP_URL').valueFrom.secretKeyRef).toEqual({ name: 'my-smtp', key: 'smtp-url' });
    for (const secret of ofKind(objects, 'Secret')) {
      expect(Object.keys(secret.data)).not.toContain('token-signing-kek');
      expect(Object.keys(secret.data)).not.toContain('smtp-url');
    }
  });

  it('a changed inline KEK rolls the pods (the Secret checksum changes)', () => {
    const checksum = (objects: K8sObject[]) =>
      named(objects, 'Deployment', objectName('identity')).spec.template.metadata.annotations[
        'checksum/secret'
      ];
    const other = Buffer.from('chart-tests:another-token-kek-32').toString('base64');
    expect(checksum(render(`tokens.signingKek=${other}`))).not.toBe(checksum(render()));
  });
});
