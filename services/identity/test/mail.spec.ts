import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '@custos/service-kit';
import { simpleParser } from 'mailparser';
import { generateEmailCode } from '../src/credentials/email-code-fns';
import { generateSecretToken } from '../src/credentials/secret-token-fns';
import { FolderMailer, SmtpMailer, createMailer } from '../src/notifications/mailer';
import { Notifier } from '../src/notifications/notifier';
import { emailChangeCodeEmail, orgInviteEmail, verificationEmail } from '../src/notifications/templates';
import { type SmtpCapture, startSmtpCapture } from '@custos/testing';

const FROM = 'Custos <no-reply@custos.local>';

/** A logger whose lines the test can read. */
function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: createLogger({ service: 'identity-test', destination }) };
}

/** Log output settles on the next tick (pino writes through a stream). */
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('SmtpMailer against a real SMTP server', () => {
  let smtp: SmtpCapture;
  beforeAll(async () => {
    smtp = await startSmtpCapture();
  });
  afterAll(async () => {
    await smtp.close();
  });

  it('delivers a verification e-mail, authenticating with the credentials of SMTP_URL', async () => {
    const { lines, logger } = capturingLogger();
    // The capture server offers no STARTTLS: plaintext, as only development allows.
    const mailer = createMailer(
      { SMTP_URL: smtp.url('mailer', 'p@ss:w/rd'), SMTP_ALLOW_INSECURE: true, MAIL_FROM: FROM },
      logger,
    );
    expect(mailer).toBeInstanceOf(SmtpMailer);
    const token = generateSecretToken('cse_').token;
    const link = `http://127.0.0.1:8080/verify-email?token=${token}`;

    await mailer.send({ to: 'Ada@Example.org', ...verificationEmail({ link, token }) });

    const m = await smtp.waitForMessage((x) => x.to === 'ada@example.org', 2000);
    expect(m.auth).toEqual({ username: 'mailer', password: 'p@ss:w/rd' });
    expect(m.from).toBe('no-reply@custos.local');
    expect(m.fromHeader).toMatch(/^"?Custos"? <no-reply@custos\.local>$/);
    expect(m.subject).toBe('Confirm your e-mail address');
    expect(m.text).toContain(link);
    expect(m.raw).toMatch(/^Message-ID: </m);

    await flush();
    const sent = lines.filter((l) => l['msg'] === 'e-mail sent');
    expect(sent).toEqual([
      expect.objectContaining({ mail_transport: 'smtp', to_domain: 'example.org', template: 'verify_email' }),
    ]);
    const logged = JSON.stringify(lines);
    expect(logged).not.toContain(token.slice(-43));
    expect(logged).not.toContain('ada@');
    expect(logged).not.toContain('p@ss');
  });

  it('lets a test wait for a message that has not arrived yet, and gives up after the timeout', async () => {
    const mailer = new SmtpMailer(
      smtp.url(),
      FROM,
      createLogger({ service: 'identity-test', level: 'silent' }),
      { allowInsecure: true },
    );
    const code = generateEmailCode();
    const waiting = smtp.waitForMessage((x) => x.to === 'new@example.net', 5000);
    await mailer.send({ to: 'new@example.net', ...emailChangeCodeEmail({ code }) });
    const m = await waiting;
    expect(m.text.match(/^\s+(\d{6})$/m)?.[1]).toBe(code);
    await expect(smtp.waitForMessage((x) => x.to === 'nobody@example.net', 50)).rejects.toThrow(
      'no matching e-mail within 50 ms',
    );
  });

  it('rejects when the URL carries no credentials and the server requires them', async () => {
    const mailer = new SmtpMailer(
      `smtp://127.0.0.1:${smtp.port}`,
      FROM,
      createLogger({ service: 'identity-test', level: 'silent' }),
      { allowInsecure: true },
    );
    await expect(mailer.send({ to: 'a@example.org', subject: 's', text: 't' })).rejects.toThrow(/auth/i);
  });

  it('without SMTP_ALLOW_INSECURE sends nothing to a server that offers no STARTTLS', async () => {
    const before = smtp.messages.length;
    const mailer = createMailer(
      { SMTP_URL: smtp.url('mailer', 'pw'), MAIL_FROM: FROM },
      createLogger({ service: 'identity-test', level: 'silent' }),
    );
    await expect(mailer.send({ to: 'plain@example.org', subject: 's', text: 't' })).rejects.toThrow(
      /STARTTLS/,
    );
    expect(smtp.messages.length).toBe(before);
    expect(smtp.messages.some((m) => m.to === 'plain@example.org')).toBe(false);
  });

  it('rejects when nothing listens', async () => {
    const closed = await startSmtpCapture();
    await closed.close();
    const mailer = new SmtpMailer(
      closed.url(),
      FROM,
      createLogger({ service: 'identity-test', level: 'silent' }),
      { allowInsecure: true },
    );
    await expect(mailer.send({ to: 'a@example.org', subject: 's', text: 't' })).rejects.toThrow(
      /ECONNREFUSED/,
    );
  });
});

describe('FolderMailer', () => {
  it('writes each message as an .eml file, sortable by time, that parses back', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'custos-mail-')), 'outbox');
    const { lines, logger } = capturingLogger();
    const mailer = createMailer({ MAIL_DIR: dir, MAIL_FROM: FROM }, logger);
    expect(mailer).toBeInstanceOf(FolderMailer);

    const codes = [generateEmailCode(), generateEmailCode(), generateEmailCode()];
    for (const [i, code] of codes.entries()) {
      await mailer.send({ to: `user${i}@example.org`, ...emailChangeCodeEmail({ code }) });
    }

    const files = readdirSync(dir);
    expect(files).toHaveLength(3);
    expect(files.every((f) => /^\d{8}T\d{9}Z-\d{6}-[0-9a-f]{8}\.eml$/.test(f))).toBe(true);
    const sorted = [...files].sort();
    expect(statSync(path.join(dir, sorted[0]!)).mode & 0o777).toBe(0o600);
    for (const [i, file] of sorted.entries()) {
      const raw = readFileSync(path.join(dir, file));
      expect(raw.includes('\r\n')).toBe(true); // RFC 5322 line ends
      const parsed = await simpleParser(raw);
      expect(parsed.from?.value).toEqual([{ name: 'Custos', address: 'no-reply@custos.local' }]);
      expect(parsed.to && !Array.isArray(parsed.to) ? parsed.to.text : '').toBe(`user${i}@example.org`);
      expect(parsed.subject).toBe('Your Custos e-mail change code');
      expect(parsed.text).toContain(codes[i]);
      expect(parsed.messageId).toBeTruthy();
    }

    await flush();
    const sent = lines.filter((l) => l['msg'] === 'e-mail sent');
    expect(sent.map((l) => [l['mail_transport'], l['to_domain'], l['template']])).toEqual([
      ['folder', 'example.org', 'email_change_code'],
      ['folder', 'example.org', 'email_change_code'],
      ['folder', 'example.org', 'email_change_code'],
    ]);
    const logged = JSON.stringify(lines);
    for (const code of codes) expect(logged).not.toContain(code);
  });

  it('writes links and tokens whole: plain 7-bit text that grep finds byte for byte', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'custos-mail-')), 'outbox');
    const mailer = createMailer(
      { MAIL_DIR: dir, MAIL_FROM: FROM },
      createLogger({ service: 't', level: 'silent' }),
    );
    const notifier = new Notifier(mailer, 'https://custos.example.org');
    const token = generateSecretToken('cse_').token;
    await notifier.verifyEmail('ada@example.org', token, 86400);
    await notifier.passwordReset('ada@example.org', token, 3600);
    for (const file of readdirSync(dir).map((f) => path.join(dir, f))) {
      const raw = readFileSync(file, 'latin1');
      expect(raw).toMatch(/^Content-Transfer-Encoding: 7bit\r$/m);
      expect(raw).not.toMatch(/=\r\n/); // no quoted-printable soft line break
      const found = execFileSync('grep', ['-o', 'cse_[A-Za-z0-9_-]*', file], { encoding: 'utf8' })
        .trim()
        .split('\n');
      // The link and the bare token: both whole.
      expect(found).toEqual([token, token]);
      expect(raw).toMatch(
        new RegExp(`^https://custos\\.example\\.org/(verify-email|reset-password)\\?token=${token}\r$`, 'm'),
      );
      const parsed = await simpleParser(readFileSync(file));
      expect(parsed.text).toContain(token);
    }
  });

  it('sends text another user chose (an org name) as 8-bit UTF-8, still unencoded', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'custos-mail-')), 'outbox');
    const mailer = createMailer(
      { MAIL_DIR: dir, MAIL_FROM: FROM },
      createLogger({ service: 't', level: 'silent' }),
    );
    await mailer.send({
      to: 'bob@example.org',
      ...orgInviteEmail({
        orgName: 'Zoë’s Ærø Labs',
        inviter: 'Zoë',
        link: 'https://x.test/accept-invite?token=t',
      }),
    });
    const file = path.join(dir, readdirSync(dir)[0]!);
    const raw = readFileSync(file);
    expect(raw.toString('latin1')).toMatch(/^Content-Transfer-Encoding: 8bit\r$/m);
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe('Join "Zoë’s Ærø Labs" on Custos');
    expect(parsed.text).toContain('Zoë invited you to join "Zoë’s Ærø Labs" on Custos.');
  });
});
