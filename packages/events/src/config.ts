import { env } from '@custos/service-kit';

/** Variables of a service that publishes or consumes events. */
export const natsConfigShape = {
  NATS_URL: env.url('NATS server URL(s) with JetStream enabled; comma-separated for a cluster.', [
    'nats',
    'tls',
  ]),
  NATS_STREAM: env.string('JetStream stream that carries Custos domain events.').default('CUSTOS_EVENTS'),
  NATS_SUBJECT_PREFIX: env
    .string('Subject prefix of Custos domain events (`<prefix>.<event name>`).')
    .default('custos.events'),
};
