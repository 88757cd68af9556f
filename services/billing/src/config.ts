import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the billing service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50058, metricsPort: 9468 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
