import { describeError, type Logger } from '@custos/service-kit';
import {
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

/** Stream settings: one stream for all domain events, deduplicated by event id. */
export interface StreamSettings {
  stream: string;
  subjectPrefix: string;
  /** How long JetStream remembers message ids for deduplication. */
  duplicateWindowMs?: number;
  /** How long the stream keeps a message (its max age); absent: unlimited (tests only). */
  maxAgeMs?: number;
}

/** How a service proves who it is to NATS, and where its replies arrive. */
export interface NatsCredentials {
  user?: string;
  /** Never logged. */
  password?: string;
  /**
   * Prefix of the connection's reply inboxes (`inboxPrefixOf(service)`): NATS permissions let a
   * service subscribe only to its own inboxes.
   */
  inboxPrefix?: string;
  /** PEM file of the CA of a `tls://` server's certificate. */
  tlsCaFile?: string;
}

/**
 * A NATS connection that is established in the background and re-established forever, so a
 * service starts and keeps accepting writes (into its outbox) while NATS is down.
 */
export class NatsLink {
  private nc: NatsConnection | undefined;
  private jsClient: JetStreamClient | undefined;
  private jsm: JetStreamManager | undefined;
  private streamReady = false;
  private lastStreamProblem: string | undefined;
  private closed = false;
  private connecting: Promise<void> | undefined;

  constructor(
    private readonly servers: string[],
    private readonly settings: StreamSettings,
    private readonly logger: Logger,
    private readonly name: string,
    private readonly credentials: NatsCredentials = {},
  ) {}

  /** The subject prefix of the events on this link's stream. */
  get subjectPrefix(): string {
    return this.settings.subjectPrefix;
  }

  /** Starts connecting; resolves at once. */
  start(): void {
    this.connecting ??= this.connectLoop();
  }

  private async connectLoop(): Promise<void> {
    let delay = 200;
    while (!this.closed && !this.nc) {
      try {
        const c = this.credentials;
        const nc = await connect({
          servers: this.servers,
          name: this.name,
          reconnect: true,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 500,
          timeout: 2000,
          // No stack trace captured ahead of every request (each JetStream publish is one) in case
          // it fails: measured, building those errors was ~5 % of a publishing service's CPU. A
          // failed publish still rejects with its error; only the caller's async stack is missing.
          noAsyncTraces: true,
          ...(c.user !== undefined ? { user: c.user } : {}),
          ...(c.password !== undefined ? { pass: c.password } : {}),
          ...(c.inboxPrefix ? { inboxPrefix: c.inboxPrefix } : {}),
          ...(c.tlsCaFile ? { tls: { caFile: c.tlsCaFile } } : {}),
        });
        if (this.closed) {
          await nc.close();
          return;
        }
        let jsm: JetStreamManager;
        try {
          // Fails while JetStream is not ready (e.g. a cluster electing a leader): start over.
          jsm = await jetstreamManager(nc, { timeout: 5000 });
        } catch (err) {
          await nc.close().catch(() => undefined);
          throw err;
        }
        this.jsm = jsm;
        this.jsClient = jetstream(nc, { timeout: 5000 });
        this.nc = nc;
        this.logger.info('connected to NATS');
        void this.watchStatus(nc);
        // A connection that closes for good (not a reconnect) starts the loop again.
        void nc.closed().then(() => {
          if (this.nc !== nc || this.closed) return;
          this.nc = undefined;
          this.jsClient = undefined;
          this.jsm = undefined;
          this.streamReady = false;
          this.connecting = this.connectLoop();
        });
      } catch (err) {
        this.logger.warn({ err: describeError(err) }, 'NATS unreachable; retrying');
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  private async watchStatus(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        this.streamReady = false;
        this.logger.warn('NATS disconnected');
      } else if (s.type === 'reconnect') this.logger.info('NATS reconnected');
      // A permission violation is this service trying something its NATS user may not do: a bug
      // or a stale permissions table, never routine.
      else if (s.type === 'error')
        this.logger.error({ err: describeError(s.error) }, 'NATS refused an operation');
    }
  }

  /** The JetStream client once connected and the stream exists; undefined otherwise. */
  async ready(): Promise<{ js: JetStreamClient; jsm: JetStreamManager } | undefined> {
    if (!this.jsClient || !this.jsm || this.nc?.isClosed()) return undefined;
    if (!this.streamReady) {
      try {
        const note = await ensureStream(this.jsm, this.settings);
        if (note) this.logger.warn({ stream: this.settings.stream }, note);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (message !== this.lastStreamProblem)
          this.logger.error({ err: describeError(err) }, 'event stream not usable');
        this.lastStreamProblem = message;
        throw err;
      }
      this.lastStreamProblem = undefined;
      this.streamReady = true;
    }
    return { js: this.jsClient, jsm: this.jsm };
  }

  /** True while a connection to a server is up. */
  isConnected(): boolean {
    return !!this.nc && !this.nc.isClosed() && this.streamReady;
  }

  /** Drains and closes the connection. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.nc && !this.nc.isClosed()) await this.nc.drain().catch(() => this.nc?.close());
  }
}

/**
 * Creates the events stream, or checks the one that exists; idempotent and safe to race. Every
 * service may create it (whoever starts first on a fresh install), so every service also checks what
 * it finds: a stream that does not carry the prefix, or that lets a publisher roll up (purge) the
 * stream with a `Nats-Rollup` header, is refused — the link stays not ready and says why — rather
 * than used. New streams also refuse message deletes and purges, and keep a message at most
 * `maxAgeMs`. An existing stream with no or a longer max age is lowered to it; when NATS refuses
 * (services have no stream-edit rights in a secured install) the stream is still used and the
 * returned note says what the operator should run. Returns undefined when nothing needs saying.
 */
export async function ensureStream(jsm: JetStreamManager, s: StreamSettings): Promise<string | undefined> {
  const maxAge = s.maxAgeMs ? nanos(s.maxAgeMs) : 0;
  const dupMs = s.duplicateWindowMs ?? 2 * 60 * 60 * 1000;
  const config = {
    name: s.stream,
    subjects: [`${s.subjectPrefix}.>`],
    // NATS requires the duplicate window to fit in the max age.
    duplicate_window: nanos(s.maxAgeMs ? Math.min(dupMs, s.maxAgeMs) : dupMs),
    allow_rollup_hdrs: false,
    deny_delete: true,
    deny_purge: true,
    max_age: maxAge,
  };
  let info;
  try {
    info = await jsm.streams.info(s.stream);
  } catch {
    try {
      await jsm.streams.add(config);
      return undefined;
    } catch (err) {
      // Another process may have created it in between; fall through to verify.
      info = await jsm.streams.info(s.stream).catch(() => {
        throw err;
      });
    }
  }
  const problem = streamConfigProblem(info.config, config.subjects[0]!);
  if (problem) throw new Error(`stream ${s.stream} is not safe to use: ${problem}`);
  return lowerMaxAge(jsm, info.config, maxAge);
}

/**
 * Lowers an existing stream's max age to `maxAge` (nanoseconds) when it keeps messages longer (0:
 * forever). A shorter max age an operator chose is kept. Returns a note when NATS refused.
 */
async function lowerMaxAge(
  jsm: JetStreamManager,
  c: StreamConfig,
  maxAge: number,
): Promise<string | undefined> {
  if (!maxAge || (c.max_age > 0 && c.max_age <= maxAge)) return undefined;
  const hours = Math.round(maxAge / 3.6e12);
  try {
    await jsm.streams.update(c.name, {
      ...c,
      max_age: maxAge,
      duplicate_window: Math.min(c.duplicate_window ?? maxAge, maxAge),
    });
    return `event stream max age lowered to ${hours} h (NATS_STREAM_MAX_AGE_HOURS)`;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return (
      `event stream keeps messages ${c.max_age > 0 ? `${Math.round(c.max_age / 3.6e12)} h` : 'forever'}, ` +
      `longer than NATS_STREAM_MAX_AGE_HOURS (${hours} h), and could not be lowered (${why}); ` +
      `run: nats stream edit ${c.name} --max-age ${hours}h`
    );
  }
}

/** Why an existing stream's configuration cannot carry Custos events, or undefined when it can. */
export function streamConfigProblem(
  c: { subjects?: string[]; allow_rollup_hdrs?: boolean; sealed?: boolean },
  subject: string,
): string | undefined {
  if (!(c.subjects ?? []).includes(subject)) return `its subjects do not include ${subject}`;
  if (c.allow_rollup_hdrs) return 'it allows Nats-Rollup headers (any publisher could purge it)';
  if (c.sealed) return 'it is sealed';
  return undefined;
}
