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
  NATS_USER: env
    .string(
      "This service's NATS user; its permissions allow only this service's own events, audit records and consumers (see docs/security.md).",
    )
    .optional(),
  NATS_PASSWORD: env.string('Password of NATS_USER (never logged).').optional(),
  NATS_TLS_CA_FILE: env
    .string('PEM file of the CA that signed the NATS server certificate (tls:// servers with a private CA).')
    .optional(),
};
