import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, createLogger } from '@custos/service-kit';
import { FolderMailer, SmtpMailer, createMailer } from './mailer';

const logger = createLogger({ service: 'identity-test', level: 'silent' });

describe('createMailer', () => {
  const dir = path.join(mkdtempSync(path.join(tmpdir(), 'custos-mail-')), 'out');

  it('prefers SMTP when SMTP_URL is set', () => {
    const m = createMailer(
      { SMTP_URL: 'smtp://u:p@127.0.0.1:2525', MAIL_DIR: dir, MAIL_FROM: 'x@y.z' },
      logger,
    );
    expect(m).toBeInstanceOf(SmtpMailer);
  });

  it('writes to MAIL_DIR when only that is set', () => {
    const m = createMailer({ MAIL_DIR: dir, MAIL_FROM: 'x@y.z' }, logger);
    expect(m).toBeInstanceOf(FolderMailer);
    expect((m as FolderMailer).dir).toBe(dir);
  });

  it('refuses to start with neither, naming SMTP_URL', () => {
    expect(() => createMailer({ MAIL_FROM: 'x@y.z' }, logger)).toThrow(ConfigError);
    try {
      createMailer({ SMTP_URL: '', MAIL_DIR: '', MAIL_FROM: 'x@y.z' }, logger);
    } catch (err) {
      expect((err as ConfigError).problems.map((p) => p.variable)).toEqual(['SMTP_URL']);
    }
    expect.assertions(2);
  });

  it('refuses at start an SMTP_URL that would send without TLS, unless SMTP_ALLOW_INSECURE', () => {
    const url = 'smtp://u:p@127.0.0.1:2525?ignoreTLS=true';
    expect(() => createMailer({ SMTP_URL: url, MAIL_FROM: 'x@y.z' }, logger)).toThrow(ConfigError);
    expect(
      createMailer({ SMTP_URL: url, SMTP_ALLOW_INSECURE: true, MAIL_FROM: 'x@y.z' }, logger),
    ).toBeInstanceOf(SmtpMailer);
  });

  it('refuses a malformed SMTP_URL at start, not at the first e-mail', () => {
    expect(() => createMailer({ SMTP_URL: 'smtp://h?pool=true', MAIL_FROM: 'x@y.z' }, logger)).toThrow(
      ConfigError,
    );
  });
});
