// values.schema.json turns a typo or a wrong type into a failed install instead of a silently
// ignored value; the chart's own checks refuse an install with no database configured.
import { chartDir, renderChart, runHelm } from './helm';

function template(...sets: string[]) {
  return runHelm(['template', 'custos', chartDir, ...sets.flatMap((s) => ['--set', s])]);
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
    ['a non-Postgres database URL', 'postgres.url=mysql://db/custos', /postgres/],
    ['a master key that is not base64 of 32 bytes', 'kms.localMasterKey=c2hvcnQ=', /localMasterKey/],
    ['a non-string env value', 'services.audit.env.FOO=1', /FOO|env/],
  ])('rejects %s (%s)', (_label, set, mentions) => {
    const { status, stderr } = template(set);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/schema/);
    expect(stderr).toMatch(mentions);
  });

  it('accepts valid overrides and applies them', () => {
    const objects = renderChart([
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
  it('refuses to render without any Postgres connection', () => {
    const { status, stderr } = template('postgres.url=', 'postgres.existingSecret=');
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/postgres\.existingSecret/);
  });

  it('refuses to render without any Redis connection', () => {
    const { status, stderr } = template('redis.url=', 'redis.existingSecret=');
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/redis\.existingSecret/);
  });
});
