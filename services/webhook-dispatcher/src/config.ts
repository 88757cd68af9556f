import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the webhook-dispatcher service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50057, metricsPort: 9467 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
