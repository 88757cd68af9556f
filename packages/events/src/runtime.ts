import type { ConfigOf, Runtime } from '@custos/service-kit';
import type pg from 'pg';
import type { natsConfigShape } from './config.js';
import { NatsLink } from './nats.js';
import { OutboxRelay } from './relay.js';

/** The event plumbing of one service: its NATS link and outbox relay. */
export interface ServiceEvents {
  link: NatsLink;
  relay: OutboxRelay;
  stream: string;
  subjectPrefix: string;
}

/**
 * Connects to NATS in the background and starts the outbox relay of `schema`; both stop at
 * shutdown (the relay before the pool, which was registered earlier).
 */
export function startEvents(
  rt: Runtime<ConfigOf<typeof natsConfigShape>>,
  opts: { pool: pg.Pool; schema: string },
): ServiceEvents {
  const link = new NatsLink(
    rt.config.NATS_URL.split(',').map((s) => s.trim()),
    { stream: rt.config.NATS_STREAM, subjectPrefix: rt.config.NATS_SUBJECT_PREFIX },
    rt.logger,
    `custos-${rt.name}`,
  );
  link.start();
  const relay = new OutboxRelay({
    pool: opts.pool,
    schema: opts.schema,
    link,
    subjectPrefix: rt.config.NATS_SUBJECT_PREFIX,
    logger: rt.logger,
  });
  relay.start();
  rt.onShutdown('nats', () => link.close());
  rt.onShutdown('outbox-relay', () => relay.stop());
  return { link, relay, stream: rt.config.NATS_STREAM, subjectPrefix: rt.config.NATS_SUBJECT_PREFIX };
}
