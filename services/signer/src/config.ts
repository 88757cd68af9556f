import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the signer service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50054, metricsPort: 9464 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
