import { env } from '@custos/service-kit';

/** Variables of a service that publishes or consumes events. */
export const natsConfigShape = {
  NATS_URL: env.url('NATS server URL(s) with JetStream enabled; comma-separated for a cluster.', [
    'nats',
    'tls',
  ]),
  NATS_STREAM: env.string('JetStream stream that carries Custos domain events.').default('CUSTOS_EVENTS'),
  NATS_STREAM_MAX_AGE_HOURS: env
    .int(
      "Hours JetStream keeps an event (the stream's max age); older events are removed, consumed or not. An event not consumed by then (e.g. the audit service down that long) is lost. New streams are created with it; a service that finds an existing stream with no or a longer max age asks NATS to lower it (refused without stream-edit rights: then a warning tells the operator).",
      2,
      24 * 365,
    )
    .default(168),
  NATS_BATCH_AUDIT_RECORDS: env
    .bool(
      'Send audit records several to a JetStream message (a batch envelope). Set false on every producer while upgrading from a release before batching, until the audit service runs this release: an older audit service cannot read a batch and would drop its records.',
    )
    .default('true'),
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
