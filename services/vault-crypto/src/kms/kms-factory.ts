import { readFileSync } from 'node:fs';
import { ConfigError, type Logger } from '@custos/service-kit';
import { AwsKms, type AwsKmsOptions } from './aws-kms.js';
import type { KmsProvider } from './kms-types.js';
import { LocalKms, loadLocalMasterKey } from './local-kms.js';
import { Pkcs11Kms } from './pkcs11-kms.js';
import type { Pkcs11TokenOptions } from './pkcs11-token.js';

/** The settings createKmsProvider reads (see kms-config.ts). */
export interface KmsSettings {
  KMS_PROVIDER: string;
  KMS_ALLOW_LOCAL?: boolean | undefined;
  LOCAL_KMS_MASTER_KEY?: string | undefined;
  LOCAL_KMS_MASTER_KEY_FILE?: string | undefined;
  AWS_KMS_KEY_ID?: string | undefined;
  AWS_REGION?: string | undefined;
  AWS_KMS_ENDPOINT?: string | undefined;
  AWS_KMS_TIMEOUT_MS?: number | undefined;
  PKCS11_LIBRARY?: string | undefined;
  PKCS11_SLOT?: number | undefined;
  PKCS11_TOKEN_LABEL?: string | undefined;
  PKCS11_PIN?: string | undefined;
  PKCS11_PIN_FILE?: string | undefined;
  PKCS11_KEY_LABEL?: string | undefined;
  PKCS11_GENERATE_KEY?: boolean | undefined;
}

type Problem = { variable: string; reason: string };

const ARN_REGION = /^arn:aws[a-z-]*:kms:([a-z0-9-]+):/;

/** The aws-kms settings, or a ConfigError naming every missing variable. */
export function awsKmsOptions(config: KmsSettings): AwsKmsOptions {
  const problems: Problem[] = [];
  const keyId = config.AWS_KMS_KEY_ID;
  if (!keyId) problems.push({ variable: 'AWS_KMS_KEY_ID', reason: 'is required when KMS_PROVIDER=aws-kms' });
  const region = config.AWS_REGION ?? (keyId ? ARN_REGION.exec(keyId)?.[1] : undefined);
  if (!region) {
    problems.push({
      variable: 'AWS_REGION',
      reason: 'is required when KMS_PROVIDER=aws-kms and AWS_KMS_KEY_ID is not an ARN',
    });
  }
  if (problems.length > 0 || !keyId || !region) throw new ConfigError(problems);
  return { keyId, region, endpoint: config.AWS_KMS_ENDPOINT, timeoutMs: config.AWS_KMS_TIMEOUT_MS ?? 5000 };
}

/** The pkcs11 settings (the PIN read from its file), or a ConfigError naming every bad variable. */
export function pkcs11Options(config: KmsSettings): Pkcs11TokenOptions {
  const problems: Problem[] = [];
  const required = (variable: string) =>
    problems.push({ variable, reason: 'is required when KMS_PROVIDER=pkcs11' });
  if (!config.PKCS11_LIBRARY) required('PKCS11_LIBRARY');
  if (config.PKCS11_SLOT === undefined && !config.PKCS11_TOKEN_LABEL) {
    problems.push({
      variable: 'PKCS11_TOKEN_LABEL',
      reason: 'PKCS11_TOKEN_LABEL or PKCS11_SLOT is required when KMS_PROVIDER=pkcs11',
    });
  }
  if (!config.PKCS11_KEY_LABEL) required('PKCS11_KEY_LABEL');
  let pin = config.PKCS11_PIN;
  let pinVariable: Pkcs11TokenOptions['pinVariable'] = 'PKCS11_PIN';
  if (!pin && config.PKCS11_PIN_FILE) {
    pinVariable = 'PKCS11_PIN_FILE';
    try {
      pin = readFileSync(config.PKCS11_PIN_FILE, 'utf8').replace(/\r?\n$/, '');
    } catch {
      problems.push({ variable: 'PKCS11_PIN_FILE', reason: 'file cannot be read' });
    }
    if (pin === '') problems.push({ variable: 'PKCS11_PIN_FILE', reason: 'file is empty' });
  } else if (!pin) {
    problems.push({
      variable: 'PKCS11_PIN',
      reason: 'PKCS11_PIN or PKCS11_PIN_FILE is required when KMS_PROVIDER=pkcs11',
    });
  }
  if (problems.length > 0 || !config.PKCS11_LIBRARY || !config.PKCS11_KEY_LABEL || !pin) {
    throw new ConfigError(problems);
  }
  return {
    library: config.PKCS11_LIBRARY,
    slot: config.PKCS11_SLOT,
    tokenLabel: config.PKCS11_TOKEN_LABEL,
    pin,
    pinVariable,
    keyLabel: config.PKCS11_KEY_LABEL,
    generateKey: config.PKCS11_GENERATE_KEY ?? false,
  };
}

/** The provider KMS_PROVIDER names, ready to wrap and unwrap; a bad setting fails naming it. */
export async function createKmsProvider(config: KmsSettings, logger: Logger): Promise<KmsProvider> {
  switch (config.KMS_PROVIDER) {
    case 'local':
      if (!config.KMS_ALLOW_LOCAL)
        throw new ConfigError([
          {
            variable: 'KMS_PROVIDER',
            reason:
              'local keeps the master key in configuration and is for development only: use aws-kms or ' +
              'pkcs11, or set KMS_ALLOW_LOCAL=true to run it anyway',
          },
        ]);
      logger.warn(
        'KMS_PROVIDER=local: key-encryption keys are wrapped with a master key from configuration. ' +
          'Development only; use aws-kms or pkcs11 in production.',
      );
      return new LocalKms(loadLocalMasterKey(config));
    case 'aws-kms': {
      const options = awsKmsOptions(config);
      // No call to KMS here: an outage at start must not stop the service from starting; it shows
      // in /v1/health/hsm and as 503s until KMS answers again.
      logger.info(
        { keyId: options.keyId, region: options.region, endpoint: options.endpoint },
        'KMS_PROVIDER=aws-kms',
      );
      return new AwsKms(options);
    }
    case 'pkcs11':
      return Pkcs11Kms.open(pkcs11Options(config), logger);
    default:
      throw new ConfigError([
        { variable: 'KMS_PROVIDER', reason: `unknown provider ${JSON.stringify(config.KMS_PROVIDER)}` },
      ]);
  }
}
