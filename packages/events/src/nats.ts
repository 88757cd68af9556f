import { describeError, type Logger } from '@custos/service-kit';
import {
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import { nanos, PermissionViolationError, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';

/** Stream settings: one stream for all domain events, deduplicated by event id. */
export interface StreamSettings {
  stream: string;
  subjectPrefix: string;
  /** How long JetStream remembers message ids for deduplication. */
  duplicateWindowMs?: number;
  /** How long the stream keeps a message (its max age); absent: unlimited (tests only). */
  maxAgeMs?: number;
  /** Copies of each message across a JetStream cluster (1..5); absent: 1. */
  replicas?: number;
  /**
   * Most bytes the stream holds; absent or -1: unlimited (bounded by max age and the server's
   * storage). When set, a full stream refuses new messages (discard `new`): the relays keep them in
   * their outboxes and retry, rather than NATS dropping the oldest events, consumed or not.
   */
  maxBytes?: number;
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
  private lastStreamNote: string | undefined;
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
      // or a stale permissions table, never routine — except the stream update ensureStream tries
      // when the stream's settings differ: a secured install grants no STREAM.UPDATE, the request
      // fails, and the note (a warning with the command to run) already says so.
      else if (s.type === 'error') {
        if (isRefusedStreamUpdate(s.error, this.settings.stream))
          this.logger.debug({ err: describeError(s.error) }, 'NATS refused the stream update (expected)');
        else this.logger.error({ err: describeError(s.error) }, 'NATS refused an operation');
      }
    }
  }

  /** The JetStream client once connected and the stream exists; undefined otherwise. */
  async ready(): Promise<{ js: JetStreamClient; jsm: JetStreamManager } | undefined> {
    if (!this.jsClient || !this.jsm || this.nc?.isClosed()) return undefined;
    if (!this.streamReady) {
      try {
        const note = await ensureStream(this.jsm, this.settings);
        // Checked again on every connect: the same note (nothing changed since) is said once.
        if (note && note !== this.lastStreamNote) this.logger.warn({ stream: this.settings.stream }, note);
        else if (note) this.logger.debug({ stream: this.settings.stream }, note);
        this.lastStreamNote = note;
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
 * The server's asynchronous `-ERR Permissions Violation for Publish to "$JS.API.STREAM.UPDATE.<stream>"`
 * that follows a refused stream update of `stream` (the update itself fails, and ensureStream's
 * note says what to run).
 */
export function isRefusedStreamUpdate(err: unknown, stream: string): boolean {
  return (
    err instanceof PermissionViolationError &&
    err.operation === 'publish' &&
    err.subject === `$JS.API.STREAM.UPDATE.${stream}`
  );
}

/**
 * Creates the events stream, or checks the one that exists; idempotent and safe to race. Every
 * service may create it (whoever starts first on a fresh install), so every service also checks what
 * it finds: a stream that does not carry the prefix, or that lets a publisher roll up (purge) the
 * stream with a `Nats-Rollup` header, is refused — the link stays not ready and says why — rather
 * than used. New streams also refuse message deletes and purges, keep a message at most `maxAgeMs`,
 * hold at most `maxBytes` (refusing new messages when full) on `replicas` servers. An existing
 * stream is brought towards the settings, never away from safety: a longer (or no) max age and a
 * larger (or no) byte limit are lowered (a byte limit only when nothing would be deleted for it),
 * fewer replicas are raised; what an operator set stricter is
 * kept. When NATS refuses the change (services have no stream-edit rights in a secured install) the
 * stream is still used and the returned note says what the operator should run; a stream with fewer
 * copies than `replicas` (a single server) is used with a note too. A new stream a single server
 * cannot replicate is refused (thrown). Returns undefined when nothing needs saying.
 */
export async function ensureStream(jsm: JetStreamManager, s: StreamSettings): Promise<string | undefined> {
  const maxAge = s.maxAgeMs ? nanos(s.maxAgeMs) : 0;
  const dupMs = s.duplicateWindowMs ?? 2 * 60 * 60 * 1000;
  const maxBytes = s.maxBytes !== undefined && s.maxBytes > 0 ? s.maxBytes : -1;
  const replicas = s.replicas ?? 1;
  const config = {
    name: s.stream,
    subjects: [`${s.subjectPrefix}.>`],
    // NATS requires the duplicate window to fit in the max age.
    duplicate_window: nanos(s.maxAgeMs ? Math.min(dupMs, s.maxAgeMs) : dupMs),
    allow_rollup_hdrs: false,
    deny_delete: true,
    deny_purge: true,
    max_age: maxAge,
    max_bytes: maxBytes,
    // With a byte limit, `old` would silently drop events no consumer has read yet; `new` refuses
    // the publish instead, and the event waits in its producer's outbox (Postgres) until room frees.
    discard: maxBytes > 0 ? DiscardPolicy.New : DiscardPolicy.Old,
    num_replicas: replicas,
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
        throw new Error(
          `event stream ${s.stream} could not be created (${errorText(err)})` +
            (replicas > 1
              ? `; NATS_STREAM_REPLICAS is ${replicas}: it needs a JetStream cluster of at least ${replicas} servers (1 for a single server)`
              : ''),
        );
      });
    }
  }
  const problem = streamConfigProblem(info.config, config.subjects[0]!);
  if (problem) throw new Error(`stream ${s.stream} is not safe to use: ${problem}`);
  const adjusted = await adjustStream(jsm, info, { maxAge, maxBytes, replicas });
  const notes = [adjusted.note, copiesNote(adjusted.info, replicas)].filter(Boolean);
  return notes.length ? notes.join('; ') : undefined;
}

/**
 * A note when the stream has fewer copies than NATS_STREAM_REPLICAS asks: a single (non-clustered)
 * server accepts a stream update to any replica count and reports it in the configuration, yet
 * keeps one copy; only the cluster part of the stream's info shows the copies that exist.
 */
function copiesNote(info: StreamInfo, replicas: number): string | undefined {
  if (replicas <= 1) return undefined;
  const copies = info.cluster ? 1 + (info.cluster.replicas?.length ?? 0) : 1;
  if (copies >= replicas) return undefined;
  return (
    `event stream ${info.config.name} has ${copies} ${copies === 1 ? 'copy' : 'copies'}, fewer than ` +
    `NATS_STREAM_REPLICAS (${replicas})` +
    (info.cluster ? '' : ': NATS runs as a single server, not a JetStream cluster') +
    `; run ${replicas} JetStream servers in a cluster, or set NATS_STREAM_REPLICAS to ${copies}`
  );
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** What an existing stream should be moved to (NATS units: nanoseconds, bytes; -1/0: unlimited). */
interface StreamTargets {
  maxAge: number;
  maxBytes: number;
  replicas: number;
}

/**
 * Brings an existing stream towards `t`: lowers a longer (or no) max age and a larger (or no) byte
 * limit (the latter only when what the stream holds fits under it), raises fewer replicas; a
 * stricter setting an operator chose is kept. Returns a note of what
 * changed, or of what NATS refused with the `nats stream edit` command that does it.
 */
async function adjustStream(
  jsm: JetStreamManager,
  info: StreamInfo,
  t: StreamTargets,
): Promise<{ info: StreamInfo; note?: string }> {
  const c = info.config;
  const changes: Partial<StreamConfig> = {};
  const said: string[] = [];
  const flags: string[] = [];
  if (t.maxAge && !(c.max_age > 0 && c.max_age <= t.maxAge)) {
    const hours = Math.round(t.maxAge / 3.6e12);
    changes.max_age = t.maxAge;
    changes.duplicate_window = Math.min(c.duplicate_window ?? t.maxAge, t.maxAge);
    said.push(`max age ${hours} h (NATS_STREAM_MAX_AGE_HOURS; it kept messages ${ageText(c.max_age)})`);
    flags.push(`--max-age ${hours}h`);
  }
  let held: string | undefined;
  if (t.maxBytes > 0 && !(c.max_bytes > 0 && c.max_bytes <= t.maxBytes)) {
    // NATS makes a lowered limit fit at once by deleting the oldest events, consumed or not: only a
    // stream that already fits under it is lowered.
    if (info.state.bytes <= t.maxBytes) {
      changes.max_bytes = t.maxBytes;
      said.push(
        `max bytes ${t.maxBytes} (NATS_STREAM_MAX_BYTES; it was ${c.max_bytes > 0 ? c.max_bytes : 'unlimited'})`,
      );
      flags.push(`--max-bytes ${t.maxBytes}`);
    } else
      held =
        `event stream ${c.name} holds ${info.state.bytes} bytes, more than NATS_STREAM_MAX_BYTES (${t.maxBytes}), ` +
        `so its limit stays ${c.max_bytes > 0 ? c.max_bytes : 'unlimited'}: NATS would delete the oldest events, ` +
        `consumed or not, to fit. Raise NATS_STREAM_MAX_BYTES, or lower it by hand once they may go: ` +
        `nats stream edit ${c.name} --max-bytes ${t.maxBytes} --discard new`;
  }
  // A byte limit (ours or an operator's) must refuse new events rather than drop unconsumed ones.
  if ((changes.max_bytes ?? c.max_bytes) > 0 && c.discard !== DiscardPolicy.New) {
    changes.discard = DiscardPolicy.New;
    said.push(
      'discard new (a full stream refuses events, which wait in the outboxes, instead of dropping old ones)',
    );
    flags.push('--discard new');
  }
  // A single server would accept the change and still keep one copy; copiesNote says so instead.
  if (info.cluster && (c.num_replicas ?? 1) < t.replicas) {
    changes.num_replicas = t.replicas;
    said.push(`${t.replicas} replicas (NATS_STREAM_REPLICAS; it had ${c.num_replicas ?? 1})`);
    flags.push(`--replicas ${t.replicas}`);
  }
  const join = (...notes: Array<string | undefined>) => notes.filter(Boolean).join('; ');
  if (said.length === 0) return { info, ...(held ? { note: held } : {}) };
  try {
    const updated = await jsm.streams.update(c.name, { ...c, ...changes });
    return { info: updated, note: join(`event stream ${c.name} changed to ${said.join(', ')}`, held) };
  } catch (err) {
    const refused =
      `event stream ${c.name} should have ${said.join(', ')}, but NATS refused the change ` +
      `(${errorText(err)}); it is used as it is. Run: nats stream edit ${c.name} ${flags.join(' ')}`;
    return { info, note: join(refused, held) };
  }
}

function ageText(maxAge: number): string {
  return maxAge > 0 ? `${Math.round(maxAge / 3.6e12)} h` : 'forever';
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
