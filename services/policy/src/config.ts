import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the policy service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50053, metricsPort: 9463 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
