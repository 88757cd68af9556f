import { ConfigError } from '@custos/service-kit';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';

// A mail server that stops answering must not hold a signup request for nodemailer's default
// minutes; the caller logs the failure and the user can ask for another e-mail.
const DEFAULT_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 };

// The nodemailer options SMTP_URL may set as query parameters, e.g. `?requireTLS=true`.
const QUERY_OPTIONS = {
  name: 'string',
  requireTLS: 'boolean',
  ignoreTLS: 'boolean',
  authMethod: 'string',
  connectionTimeout: 'number',
  greetingTimeout: 'number',
  socketTimeout: 'number',
  'tls.rejectUnauthorized': 'boolean',
  'tls.servername': 'string',
  'tls.minVersion': 'string',
} as const;

function invalid(reason: string): ConfigError {
  return new ConfigError([{ variable: 'SMTP_URL', reason }]);
}

const INSECURE_HINT = 'set SMTP_ALLOW_INSECURE=true only for a local development mail sink';

/**
 * Turns SMTP_URL into nodemailer transport options: `smtps:` is TLS from the first byte, `smtp:`
 * must upgrade with STARTTLS (`requireTLS`: a server that does not offer it gets no message); the
 * server's certificate is verified. `allowInsecure` (SMTP_ALLOW_INSECURE, development only) lets
 * `smtp:` send in plaintext when STARTTLS is not offered, and accepts `ignoreTLS`,
 * `requireTLS=false` and `tls.rejectUnauthorized=false`. User and password come percent-decoded
 * from the URL. Throws a ConfigError naming SMTP_URL (never echoing the URL, which holds the password).
 */
export function smtpOptionsFromUrl(
  smtpUrl: string,
  opts: { allowInsecure?: boolean } = {},
): SMTPTransport.Options {
  let url: URL;
  try {
    url = new URL(smtpUrl);
  } catch {
    throw invalid('expected an smtp or smtps URL');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') throw invalid('expected an smtp or smtps URL');
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!host) throw invalid('the URL names no host');
  const secure = url.protocol === 'smtps:';
  const options: SMTPTransport.Options = {
    host,
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    ...DEFAULT_TIMEOUTS,
    // Messages are plain text we compose; nothing may make nodemailer read a file or fetch a URL.
    disableFileAccess: true,
    disableUrlAccess: true,
  };
  if (url.username || url.password) {
    try {
      options.auth = { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
    } catch {
      throw invalid('the user or password is not correctly percent-encoded');
    }
  }
  const tls: Record<string, unknown> = {};
  for (const [key, raw] of url.searchParams) {
    const kind = (QUERY_OPTIONS as Record<string, string>)[key];
    if (!kind) throw invalid(`unknown option "${key}" (known: ${Object.keys(QUERY_OPTIONS).join(', ')})`);
    let value: unknown = raw;
    if (kind === 'boolean') {
      if (raw !== 'true' && raw !== 'false') throw invalid(`option "${key}" must be true or false`);
      value = raw === 'true';
    } else if (kind === 'number') {
      value = Number(raw);
      if (!Number.isInteger(value) || (value as number) < 0)
        throw invalid(`option "${key}" must be milliseconds`);
    }
    if (key.startsWith('tls.')) tls[key.slice(4)] = value;
    else (options as Record<string, unknown>)[key] = value;
  }
  if (Object.keys(tls).length > 0) options.tls = tls;
  if (!opts.allowInsecure) {
    if (options.ignoreTLS) throw invalid(`ignoreTLS=true would send e-mail in plaintext; ${INSECURE_HINT}`);
    if (options.requireTLS === false && !secure) {
      throw invalid(`requireTLS=false would send e-mail in plaintext; ${INSECURE_HINT}`);
    }
    if (tls.rejectUnauthorized === false) {
      throw invalid(
        `tls.rejectUnauthorized=false would not verify the server's certificate; ${INSECURE_HINT}`,
      );
    }
    if (!secure) options.requireTLS = true;
  }
  return options;
}

/** The domain of an address (`Ada <ada@Example.org>` → `example.org`): all that a log line may say about a recipient. */
export function recipientDomain(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return '(none)';
  return address
    .slice(at + 1)
    .replace(/[>\s].*$/, '')
    .toLowerCase();
}

/**
 * A file name that sorts by time: `20250102T030405678Z-000001-1a2b3c4d.eml` (UTC to the
 * millisecond, a per-process sequence for messages of the same millisecond, then random hex so
 * two processes writing one folder do not collide).
 */
export function emlFileName(at: Date, sequence: number, randomHex: string): string {
  const stamp = at.toISOString().replace(/[-:.]/g, '');
  return `${stamp}-${String(sequence % 1_000_000).padStart(6, '0')}-${randomHex}.eml`;
}

/** RFC 5322 §2.1.1: no line of a message may be longer than 998 characters. */
const MAX_LINE = 998;

/**
 * A plain-text body as it travels unencoded: CRLF line ends, `7bit` when it is all ASCII, else
 * `8bit` (UTF-8). Undefined when a line is too long to travel unencoded. Sent this way, a token or
 * a link in the body is byte for byte what a `grep` of the raw message finds (quoted-printable
 * would cut it at a soft line break and write `=` as `=3D`).
 */
export function unencodedBody(text: string): { transferEncoding: '7bit' | '8bit'; body: string } | undefined {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  // eslint-disable-next-line no-control-regex
  if (lines.some((l) => Buffer.byteLength(l) > MAX_LINE || /[\u0000\r]/.test(l))) return undefined;
  // eslint-disable-next-line no-control-regex
  const ascii = /^[\u0000-\u007f]*$/.test(text);
  return { transferEncoding: ascii ? '7bit' : '8bit', body: lines.join('\r\n') };
}
