import { env } from '@custos/service-kit';

/** The environment variables that choose and configure the key-management provider. */
export const kmsConfigShape = {
  KMS_PROVIDER: env.oneOf(
    'Key-management provider that wraps the org key-encryption keys: `aws-kms` (AWS KMS), `pkcs11` ' +
      '(an HSM through its PKCS#11 module) or `local` (development only). See docs/kms.md.',
    ['local', 'aws-kms', 'pkcs11'],
  ),
  KMS_ALLOW_LOCAL: env
    .bool(
      'With KMS_PROVIDER=local: `true` lets it start. Development and tests only (the launcher sets it): ' +
        'the master key then sits in configuration beside the data it protects.',
    )
    .default('false'),
  LOCAL_KMS_MASTER_KEY: env
    .string('With KMS_PROVIDER=local: base64 of the 32-byte master key. Prefer LOCAL_KMS_MASTER_KEY_FILE.')
    .optional(),
  LOCAL_KMS_MASTER_KEY_FILE: env
    .string('With KMS_PROVIDER=local: path of a file holding the base64 master key.')
    .optional(),
  AWS_KMS_KEY_ID: env
    .string(
      'With KMS_PROVIDER=aws-kms (required): key id, key ARN, alias name (`alias/...`) or alias ARN of ' +
        'the symmetric encryption KMS key. Credentials come from the AWS SDK default chain.',
    )
    .optional(),
  AWS_REGION: env
    .string(
      'With KMS_PROVIDER=aws-kms: AWS region of the KMS key, e.g. `eu-west-1`; required unless ' +
        'AWS_KMS_KEY_ID is an ARN (its region is used).',
    )
    .optional(),
  AWS_KMS_ENDPOINT: env
    .url(
      'With KMS_PROVIDER=aws-kms: KMS endpoint URL instead of the public regional one (VPC endpoint, ' +
        'LocalStack, moto); unset uses the regional endpoint.',
      ['http', 'https'],
    )
    .optional(),
  AWS_KMS_TIMEOUT_MS: env
    .int(
      'With KMS_PROVIDER=aws-kms: deadline of one KMS call including retries, in milliseconds.',
      100,
      60000,
    )
    .default(5000),
  PKCS11_LIBRARY: env
    .string(
      'With KMS_PROVIDER=pkcs11 (required): path of the PKCS#11 module, e.g. /usr/lib/softhsm/libsofthsm2.so.',
    )
    .optional(),
  PKCS11_SLOT: env
    .int(
      'With KMS_PROVIDER=pkcs11: slot id of the token (as `pkcs11-tool -L` prints it). Set this or ' +
        'PKCS11_TOKEN_LABEL; with both, the slot’s token must carry that label.',
    )
    .optional(),
  PKCS11_TOKEN_LABEL: env
    .string('With KMS_PROVIDER=pkcs11: label of the token that holds the key. Set this or PKCS11_SLOT.')
    .optional(),
  PKCS11_PIN: env
    .string('With KMS_PROVIDER=pkcs11: user PIN of the token. Set this or PKCS11_PIN_FILE (preferred).')
    .optional(),
  PKCS11_PIN_FILE: env
    .string('With KMS_PROVIDER=pkcs11: path of a file holding the user PIN (trailing newline ignored).')
    .optional(),
  PKCS11_KEY_LABEL: env
    .string(
      'With KMS_PROVIDER=pkcs11 (required): label (CKA_LABEL) of the non-extractable, sensitive AES-256 ' +
        'key on the token that wraps the org keys.',
    )
    .optional(),
  PKCS11_GENERATE_KEY: env
    .bool(
      'With KMS_PROVIDER=pkcs11: when no key has PKCS11_KEY_LABEL, generate a non-extractable AES-256 ' +
        'key on the token at start. For the first start of a single replica; then back the token up.',
    )
    .default('false'),
};
