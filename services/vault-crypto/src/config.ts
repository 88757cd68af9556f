import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env } from '@custos/service-kit';

/** Every environment variable the vault-crypto service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50052, metricsPort: 9462 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  KMS_PROVIDER: env.oneOf('Key-management provider that wraps data keys: `local` (development only).', [
    'local',
  ]),
  LOCAL_KMS_MASTER_KEY: env
    .string('With KMS_PROVIDER=local: base64 of the 32-byte master key. Prefer LOCAL_KMS_MASTER_KEY_FILE.')
    .optional(),
  LOCAL_KMS_MASTER_KEY_FILE: env
    .string('With KMS_PROVIDER=local: path of a file holding the base64 master key.')
    .optional(),
};
