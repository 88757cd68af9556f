import type { AddressInfo } from 'node:net';
import { type AddressObject, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** One message the capture server received. */
export interface CapturedMessage {
  /** First envelope recipient (RCPT TO), lower-cased. */
  to: string;
  /** Every envelope recipient, lower-cased. */
  recipients: string[];
  /** The address of the `From` header, lower-cased, e.g. `no-reply@custos.local`. */
  from: string;
  /** The `From` header as text, e.g. `"Custos" <no-reply@custos.local>`. */
  fromHeader: string;
  /** The `To` header as text. */
  toHeader: string;
  subject: string;
  text: string;
  /** The message exactly as it came over the wire (RFC 5322). */
  raw: string;
  /** The credentials the client authenticated with, if it did. */
  auth?: { username: string; password: string };
  receivedAt: Date;
}

/** A running capture server. */
export interface SmtpCapture {
  /** The port on 127.0.0.1 it listens on. */
  readonly port: number;
  /** An SMTP_URL with credentials that reaches it, e.g. `smtp://user:pass@127.0.0.1:40123`. */
  url(username?: string, password?: string): string;
  /** Every message received so far, oldest first. */
  readonly messages: readonly CapturedMessage[];
  /**
   * The first message (received earlier or later) that satisfies `predicate`; rejects after
   * `timeoutMs` without one.
   */
  waitForMessage(predicate?: (m: CapturedMessage) => boolean, timeoutMs?: number): Promise<CapturedMessage>;
  /** Stops listening; resolves when the server is closed. */
  close(): Promise<void>;
}

function addressText(field: AddressObject | AddressObject[] | undefined): string {
  if (!field) return '';
  return (Array.isArray(field) ? field : [field]).map((a) => a.text).join(', ');
}

/** A running SMTP server of `startSmtpServer`. */
export interface SmtpServerHandle {
  /** The port on 127.0.0.1 it listens on. */
  readonly port: number;
  /** Stops listening; resolves when the server is closed. */
  close(): Promise<void>;
}

/**
 * Starts a real SMTP server on 127.0.0.1 (free port) that requires AUTH PLAIN or LOGIN, accepts
 * any credentials, and hands every parsed message to `onMessage` before it answers 250, so a
 * message is recorded by the time the client's send resolves. STARTTLS is off, so clients
 * authenticate in the clear: for tests only.
 */
export async function startSmtpServer(onMessage: (m: CapturedMessage) => void): Promise<SmtpServerHandle> {
  const credentials = new Map<string, { username: string; password: string }>();
  const server = new SMTPServer({
    logger: false,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: false,
    authMethods: ['PLAIN', 'LOGIN'],
    closeTimeout: 1000,
    onAuth(auth, session, callback) {
      credentials.set(session.id, { username: auth.username ?? '', password: auth.password ?? '' });
      callback(null, { user: auth.username ?? '' });
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (err) => callback(err));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        simpleParser(raw)
          .then((parsed) => {
            const recipients = session.envelope.rcptTo.map((r) => r.address.toLowerCase());
            const auth = credentials.get(session.id);
            onMessage({
              to: recipients[0] ?? '',
              recipients,
              from: (parsed.from?.value[0]?.address ?? '').toLowerCase(),
              fromHeader: addressText(parsed.from),
              toHeader: addressText(parsed.to),
              subject: parsed.subject ?? '',
              text: parsed.text ?? '',
              raw: raw.toString('utf8'),
              ...(auth ? { auth } : {}),
              receivedAt: new Date(),
            });
            callback();
          })
          .catch((err: Error) => callback(err));
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Starts a real SMTP server on 127.0.0.1 (free port) that requires AUTH PLAIN or LOGIN, accepts
 * any credentials, and keeps every message. STARTTLS is off, so clients authenticate in the clear:
 * for tests only.
 */
export async function startSmtpCapture(): Promise<SmtpCapture> {
  const messages: CapturedMessage[] = [];
  const waiters = new Set<{
    predicate: (m: CapturedMessage) => boolean;
    resolve: (m: CapturedMessage) => void;
  }>();
  const server = await startSmtpServer((message) => {
    messages.push(message);
    for (const w of [...waiters]) {
      if (w.predicate(message)) {
        waiters.delete(w);
        w.resolve(message);
      }
    }
  });
  const port = server.port;

  return {
    port,
    url: (username = 'custos', password = 'capture-password') =>
      `smtp://${encodeURIComponent(username)}:${encodeURIComponent(password)}@127.0.0.1:${port}`,
    messages,
    waitForMessage(predicate = () => true, timeoutMs = 5000) {
      const earlier = messages.find(predicate);
      if (earlier) return Promise.resolve(earlier);
      return new Promise<CapturedMessage>((resolve, reject) => {
        const waiter = {
          predicate,
          resolve: (m: CapturedMessage) => {
            clearTimeout(timer);
            resolve(m);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(
            new Error(
              `no matching e-mail within ${timeoutMs} ms (${messages.length} received, to: ${
                messages.map((m) => m.to).join(', ') || 'none'
              })`,
            ),
          );
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    close: () => server.close(),
  };
}
