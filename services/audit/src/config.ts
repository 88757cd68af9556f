import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape } from '@custos/service-kit';

/** Every environment variable the audit service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50056, metricsPort: 9466 }),
  ...databaseConfigShape,
  ...natsConfigShape,
};
