import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the approvals service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50055, metricsPort: 9465 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
