import { env } from '@custos/service-kit';

const MAX_BYTES_DOC =
  "Most bytes the JetStream stream holds; -1: unlimited (bounded by NATS_STREAM_MAX_AGE_HOURS and the server's JetStream storage). When set (at least 1048576), a full stream refuses new events (discard policy `new`): they wait in each service's outbox and go out once old events age out, rather than NATS dropping events not yet consumed. An existing stream with no or a larger limit is lowered to it when what it holds fits under it (NATS would otherwise delete the oldest events to fit); otherwise, or without stream-edit rights, a warning gives the operator the `nats stream edit` command.";

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
  NATS_STREAM_REPLICAS: env
    .int(
      'Copies of each event the JetStream stream keeps across a NATS cluster (3 on a three-server JetStream cluster; 1 on a single server, which refuses more). New streams are created with it; an existing stream with fewer replicas is raised to it (more are kept); when NATS refuses, the stream is used as it is and a warning gives the `nats stream edit` command.',
      1,
      5,
    )
    .default(1),
  NATS_STREAM_MAX_BYTES: env
    .int(MAX_BYTES_DOC, -1)
    .refine((v) => v === -1 || v >= 1024 * 1024, {
      message: 'expected -1 (unlimited) or at least 1048576 bytes',
    })
    .describe(MAX_BYTES_DOC)
    .default(-1),
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
