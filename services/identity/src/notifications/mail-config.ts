import { env } from '@custos/service-kit';

/** The environment variables of outgoing e-mail; spread into the service's config shape. */
export const mailConfigShape = {
  SMTP_URL: env
    .url(
      'SMTP server that sends e-mail, as `smtp://user:password@host:587` (STARTTLS when offered) or ' +
        '`smtps://user:password@host:465` (TLS); percent-encode special characters in the password. ' +
        'Required unless MAIL_DIR is set.',
      ['smtp', 'smtps'],
    )
    .optional(),
  SMTP_ALLOW_INSECURE: env
    .bool(
      'Development and tests only: let SMTP_URL send without TLS. Unset (false), an `smtp:` URL must upgrade with STARTTLS (a server that does not offer it gets no mail), the server certificate is verified, and the start-up refuses `ignoreTLS=true`, `requireTLS=false` and `tls.rejectUnauthorized=false` in SMTP_URL.',
    )
    .default('false'),
  MAIL_DIR: env
    .string(
      'Development only: write each e-mail as an `.eml` file into this folder instead of sending it. ' +
        'Used when SMTP_URL is not set.',
    )
    .optional(),
  MAIL_FROM: env.string('Sender (`From`) of every e-mail.').default('Custos <no-reply@custos.local>'),
  PUBLIC_BASE_URL: env
    .url('Public base URL of the web app, the start of every link in an e-mail.', ['http', 'https'])
    .transform((v) => v.replace(/\/+$/, ''))
    .default('http://127.0.0.1:8080'),
};
