import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the identity service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50051, metricsPort: 9461 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
