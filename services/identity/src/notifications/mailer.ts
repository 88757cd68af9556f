import { randomBytes } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Logger } from '@custos/service-kit';
import { createTransport } from 'nodemailer';
import { emlFileName, recipientDomain, smtpOptionsFromUrl } from './mail-fns.js';

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

/** Sends e-mail through an SMTP server given as SMTP_URL. */
export class SmtpMailer implements Mailer {
  private readonly transport;

  constructor(
    smtpUrl: string,
    private readonly from: string,
    private readonly logger: Logger,
  ) {
    this.transport = createTransport(smtpOptionsFromUrl(smtpUrl));
  }

  async send(message: MailMessage): Promise<void> {
    await this.transport.sendMail({
      from: this.from,
      to: message.to,
      subject: message.subject,
      text: message.text,
    });
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
    const info = await this.transport.sendMail({
      from: this.from,
      to: message.to,
      subject: message.subject,
      text: message.text,
    });
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
 * The mailer the configuration asks for: SMTP when SMTP_URL is set, else the folder MAIL_DIR
 * (development), else a ConfigError naming SMTP_URL.
 */
export function createMailer(
  config: { SMTP_URL?: string; MAIL_DIR?: string; MAIL_FROM: string },
  logger: Logger,
): Mailer {
  if (config.SMTP_URL) return new SmtpMailer(config.SMTP_URL, config.MAIL_FROM, logger);
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
