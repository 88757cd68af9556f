// The audit service's HMAC key: required, only by Secret reference, and only on the audit service.
import { SERVICES } from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  named,
  objectName,
  renderChart,
  runHelm,
  chartDir,
  release,
} from './helm';

function envOf(objects: K8sObject[], service: string): Map<string, Json> {
  const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

const withoutAuditKey = REQUIRED_SETS.filter(
  (s, i, all) => !s.startsWith('audit.') && all[i + 1]?.startsWith('audit.') !== true,
);

describe('audit values', () => {
  it('AUDIT_HMAC_KEY reaches the audit service only, by reference to the chart-managed Secret', () => {
    const objects = renderChart(REQUIRED_SETS);
    const env = envOf(objects, 'audit');
    expect(env.get('AUDIT_HMAC_KEY')).toEqual({
      name: 'AUDIT_HMAC_KEY',
      valueFrom: { secretKeyRef: { name: expect.any(String), key: 'audit-hmac-key' } },
    });
    for (const service of SERVICES.filter((s) => s !== 'audit'))
      expect({ service, has: envOf(objects, service).has('AUDIT_HMAC_KEY') }).toEqual({
        service,
        has: false,
      });
  });

  it('an existing Secret wins over the inline key', () => {
    const env = envOf(
      renderChart([
        ...REQUIRED_SETS,
        '--set',
        'audit.existingSecret=my-audit',
        '--set',
        'audit.existingSecretKey=k',
      ]),
      'audit',
    );
    expect(env.get('AUDIT_HMAC_KEY').valueFrom.secretKeyRef).toEqual({ name: 'my-audit', key: 'k' });
  });

  it('refuses to render without a key, naming the value to set', () => {
    expect(withoutAuditKey).not.toContain(expect.stringMatching(/^audit\./));
    const r = runHelm([
      'template',
      release.name,
      chartDir,
      '--namespace',
      release.namespace,
      ...withoutAuditKey,
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/audit\.existingSecret \(recommended\) or audit\.hmacKey/);
  });

  it('refuses a key that is not base64 of 32 bytes', () => {
    const r = runHelm([
      'template',
      release.name,
      chartDir,
      '--namespace',
      release.namespace,
      ...withoutAuditKey,
      '--set',
      'audit.hmacKey=short',
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/hmacKey/);
  });

  describe('AUDIT_CHECKPOINT_SIGNING_KEY', () => {
    const seed = Buffer.alloc(32, 7).toString('base64');

    it('is absent unless given (checkpoints off), and never reaches another service', () => {
      expect(envOf(renderChart(REQUIRED_SETS), 'audit').has('AUDIT_CHECKPOINT_SIGNING_KEY')).toBe(false);
      const objects = renderChart([...REQUIRED_SETS, '--set', `audit.checkpointSigningKey=${seed}`]);
      expect(envOf(objects, 'audit').get('AUDIT_CHECKPOINT_SIGNING_KEY')).toEqual({
        name: 'AUDIT_CHECKPOINT_SIGNING_KEY',
        valueFrom: { secretKeyRef: { name: expect.any(String), key: 'audit-checkpoint-signing-key' } },
      });
      for (const service of SERVICES.filter((s) => s !== 'audit'))
        expect({ service, has: envOf(objects, service).has('AUDIT_CHECKPOINT_SIGNING_KEY') }).toEqual({
          service,
          has: false,
        });
      // The inline key lands in the chart-managed Secret under that name, apart from the HMAC key.
      const ref = envOf(objects, 'audit').get('AUDIT_CHECKPOINT_SIGNING_KEY').valueFrom.secretKeyRef;
      const secret = named(objects, 'Secret', ref.name);
      expect(Buffer.from(secret.data['audit-checkpoint-signing-key'], 'base64').toString()).toBe(seed);
      expect(secret.data['audit-hmac-key']).toBeDefined();
    });

    it('an existing Secret wins over the inline key', () => {
      const env = envOf(
        renderChart([
          ...REQUIRED_SETS,
          '--set',
          `audit.checkpointSigningKey=${seed}`,
          '--set',
          'audit.checkpointExistingSecret=my-audit',
          '--set',
          'audit.checkpointExistingSecretKey=cp',
        ]),
        'audit',
      );
      // Optional: an existing Secret made before the checkpoint key keeps audit starting (unsigned).
      expect(env.get('AUDIT_CHECKPOINT_SIGNING_KEY').valueFrom.secretKeyRef).toEqual({
        name: 'my-audit',
        key: 'cp',
        optional: true,
      });
    });

    it('refuses a key that is neither base64 of 32 bytes nor a PEM', () => {
      const r = runHelm([
        'template',
        release.name,
        chartDir,
        '--namespace',
        release.namespace,
        ...REQUIRED_SETS,
        '--set',
        'audit.checkpointSigningKey=short',
      ]);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/checkpointSigningKey/);
    });
  });
});
