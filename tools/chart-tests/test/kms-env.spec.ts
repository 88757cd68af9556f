// vault-crypto's KMS settings: each provider's variables reach vault-crypto only, the PKCS#11 PIN
// only by Secret reference, blank optional values are left out, and the schema refuses a provider
// whose required settings are missing.
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

const KMS_VARIABLES = [
  'KMS_PROVIDER',
  'LOCAL_KMS_MASTER_KEY',
  'AWS_KMS_KEY_ID',
  'AWS_REGION',
  'AWS_KMS_ENDPOINT',
  'AWS_KMS_TIMEOUT_MS',
  'PKCS11_LIBRARY',
  'PKCS11_TOKEN_LABEL',
  'PKCS11_SLOT',
  'PKCS11_KEY_LABEL',
  'PKCS11_GENERATE_KEY',
  'PKCS11_PIN',
];

function envOf(objects: K8sObject[], service: string): Map<string, Json> {
  const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

function kmsEnv(objects: K8sObject[]): Record<string, Json> {
  const env = envOf(objects, 'vault-crypto');
  return Object.fromEntries(KMS_VARIABLES.filter((k) => env.has(k)).map((k) => [k, env.get(k)]));
}

function expectOnlyVaultCryptoHasKms(objects: K8sObject[]): void {
  for (const service of SERVICES.filter((s) => s !== 'vault-crypto')) {
    const names = [...envOf(objects, service).keys()];
    expect(names.filter((n) => KMS_VARIABLES.includes(n))).toEqual([]);
  }
}

describe('KMS settings of vault-crypto', () => {
  it('aws-kms: key, region, endpoint and timeout as plain values; no local key', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'kms.provider=aws-kms',
      '--set',
      'kms.localMasterKey=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
      '--set',
      'kms.aws.keyId=alias/custos',
      '--set',
      'kms.aws.region=eu-west-1',
      '--set',
      'kms.aws.endpoint=https://vpce-1.kms.eu-west-1.vpce.amazonaws.com',
      '--set',
      'kms.aws.timeoutMs=3000',
    ]);
    expect(kmsEnv(objects)).toEqual({
      KMS_PROVIDER: { name: 'KMS_PROVIDER', value: 'aws-kms' },
      AWS_KMS_KEY_ID: { name: 'AWS_KMS_KEY_ID', value: 'alias/custos' },
      AWS_REGION: { name: 'AWS_REGION', value: 'eu-west-1' },
      AWS_KMS_ENDPOINT: {
        name: 'AWS_KMS_ENDPOINT',
        value: 'https://vpce-1.kms.eu-west-1.vpce.amazonaws.com',
      },
      AWS_KMS_TIMEOUT_MS: { name: 'AWS_KMS_TIMEOUT_MS', value: '3000' },
    });
    expectOnlyVaultCryptoHasKms(objects);
  });

  it('aws-kms: blank region, endpoint and timeout are left out (the service defaults apply)', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'kms.provider=aws-kms',
      '--set',
      'kms.aws.keyId=arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    ]);
    expect(Object.keys(kmsEnv(objects)).sort()).toEqual(['AWS_KMS_KEY_ID', 'KMS_PROVIDER']);
  });

  it('pkcs11: module, token, key and slot as plain values, the PIN only from its Secret', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'kms.provider=pkcs11',
      '--set',
      'kms.pkcs11.library=/opt/hsm/lib/libpkcs11.so',
      '--set',
      'kms.pkcs11.tokenLabel=custos',
      '--set',
      'kms.pkcs11.slot=0',
      '--set',
      'kms.pkcs11.keyLabel=custos-kek',
      '--set',
      'kms.pkcs11.pinSecret=hsm-pin',
    ]);
    expect(kmsEnv(objects)).toEqual({
      KMS_PROVIDER: { name: 'KMS_PROVIDER', value: 'pkcs11' },
      PKCS11_LIBRARY: { name: 'PKCS11_LIBRARY', value: '/opt/hsm/lib/libpkcs11.so' },
      PKCS11_TOKEN_LABEL: { name: 'PKCS11_TOKEN_LABEL', value: 'custos' },
      PKCS11_SLOT: { name: 'PKCS11_SLOT', value: '0' },
      PKCS11_KEY_LABEL: { name: 'PKCS11_KEY_LABEL', value: 'custos-kek' },
      PKCS11_GENERATE_KEY: { name: 'PKCS11_GENERATE_KEY', value: 'false' },
      PKCS11_PIN: { name: 'PKCS11_PIN', valueFrom: { secretKeyRef: { name: 'hsm-pin', key: 'pin' } } },
    });
    expectOnlyVaultCryptoHasKms(objects);
  });

  it.each([
    ['aws-kms without a key id', ['--set', 'kms.provider=aws-kms'], 'keyId'],
    [
      'pkcs11 without a module',
      ['--set', 'kms.provider=pkcs11', '--set', 'kms.pkcs11.keyLabel=k', '--set', 'kms.pkcs11.pinSecret=p'],
      'library',
    ],
    [
      'pkcs11 without a PIN Secret',
      ['--set', 'kms.provider=pkcs11', '--set', 'kms.pkcs11.library=/l.so', '--set', 'kms.pkcs11.keyLabel=k'],
      'pinSecret',
    ],
    [
      'pkcs11 without a key label',
      [
        '--set',
        'kms.provider=pkcs11',
        '--set',
        'kms.pkcs11.library=/l.so',
        '--set',
        'kms.pkcs11.pinSecret=p',
      ],
      'keyLabel',
    ],
  ])('refuses %s, naming the value', (_label, sets, field) => {
    const result = runHelm([
      'template',
      release.name,
      chartDir,
      '--namespace',
      release.namespace,
      ...REQUIRED_SETS,
      ...sets,
    ]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(field);
  });
});
