import { randomBytes } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Logger } from '@custos/service-kit';
import { createTransport } from 'nodemailer';
import MimeNode from 'nodemailer/lib/mime-node';
import { emlFileName, recipientDomain, smtpOptionsFromUrl, unencodedBody } from './mail-fns.js';

/** One outgoing e-mail. `template` (see templates.ts) is what the log line names. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  template?: string;
}

/** Sends e-mail. Implementations log the recipient's domain and the template, never the content. */
export interface Mailer {
  /** Sends one message; rejects when it could not be handed over. */
  send(message: MailMessage): Promise<void>;
}

function logSent(logger: Logger, transport: string, message: MailMessage): void {
  logger.info(
    {
      mail_transport: transport,
      to_domain: recipientDomain(message.to),
      template: message.template ?? 'unnamed',
    },
    'e-mail sent',
  );
}

/**
 * The message as RFC 5322 bytes: nodemailer writes the headers (encoded words, folding, Date,
 * Message-ID), and the body travels unencoded (7bit, or 8bit for non-ASCII text) so that links and
 * tokens stay whole in the raw message. nodemailer alone would pick quoted-printable for any line
 * over 76 characters, and every link with a token is longer. Undefined when the body cannot travel
 * unencoded; nodemailer then composes the whole message.
 */
export function composeMessage(from: string, message: MailMessage): Buffer | undefined {
  const plain = unencodedBody(message.text);
  if (!plain) return undefined;
  const node = new MimeNode('text/plain; charset=utf-8', { newline: 'windows' });
  node.setHeader({ from, to: message.to, subject: message.subject });
  const headers = node.buildHeaders();
  return Buffer.from(
    `${headers}\r\nContent-Transfer-Encoding: ${plain.transferEncoding}\r\n\r\n${plain.body}`,
    'utf8',
  );
}

/** nodemailer's message options: the composed bytes, or the parts when they cannot travel so. */
function mailOptions(from: string, message: MailMessage) {
  const raw = composeMessage(from, message);
  return raw
    ? { envelope: { from, to: message.to }, raw }
    : { from, to: message.to, subject: message.subject, text: message.text };
}

/** Sends e-mail through an SMTP server given as SMTP_URL. */
export class SmtpMailer implements Mailer {
  private readonly transport;

  constructor(
    smtpUrl: string,
    private readonly from: string,
    private readonly logger: Logger,
    opts: { allowInsecure?: boolean } = {},
  ) {
    this.transport = createTransport(smtpOptionsFromUrl(smtpUrl, opts));
  }

  async send(message: MailMessage): Promise<void> {
    await this.transport.sendMail(mailOptions(this.from, message));
    logSent(this.logger, 'smtp', message);
  }
}

/**
 * Development mail: each message becomes an RFC 5322 `.eml` file in a folder, named so that the
 * files sort by the time they were written. A file appears complete or not at all.
 */
export class FolderMailer implements Mailer {
  // nodemailer composes the message (headers, encoding, Message-ID) exactly as SMTP would send it.
  private readonly transport = createTransport({
    streamTransport: true,
    buffer: true,
    newline: 'windows',
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  private sequence = 0;

  constructor(
    readonly dir: string,
    private readonly from: string,
    private readonly logger: Logger,
  ) {}

  async send(message: MailMessage): Promise<void> {
    const info = await this.transport.sendMail(mailOptions(this.from, message));
    // With `buffer: true` the message is a Buffer; the union type does not know that.
    const bytes = info.message as Buffer;
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const name = emlFileName(new Date(), ++this.sequence, randomBytes(4).toString('hex'));
    const tmp = path.join(this.dir, `.${name}.tmp`);
    // The files hold live sign-in links and codes: readable by this user only.
    await writeFile(tmp, bytes, { mode: 0o600 });
    await rename(tmp, path.join(this.dir, name));
    logSent(this.logger, 'folder', message);
  }
}

/**
 * The mailer the configuration asks for: SMTP when SMTP_URL is set (TLS required unless
 * SMTP_ALLOW_INSECURE), else the folder MAIL_DIR (development), else a ConfigError naming SMTP_URL.
 */
export function createMailer(
  config: { SMTP_URL?: string; SMTP_ALLOW_INSECURE?: boolean; MAIL_DIR?: string; MAIL_FROM: string },
  logger: Logger,
): Mailer {
  if (config.SMTP_URL) {
    const allowInsecure = config.SMTP_ALLOW_INSECURE === true;
    if (allowInsecure) {
      logger.warn(
        'SMTP_ALLOW_INSECURE is set: e-mail may travel in plaintext and unverified (development only)',
      );
    }
    return new SmtpMailer(config.SMTP_URL, config.MAIL_FROM, logger, { allowInsecure });
  }
  if (config.MAIL_DIR) {
    logger.warn({ mail_dir: config.MAIL_DIR }, 'MAIL_DIR is set: e-mail is written to files, not sent');
    return new FolderMailer(config.MAIL_DIR, config.MAIL_FROM, logger);
  }
  throw new ConfigError([
    {
      variable: 'SMTP_URL',
      reason: 'is required to send e-mail (or set MAIL_DIR to write e-mail to files in development)',
    },
  ]);
}
