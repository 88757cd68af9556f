import { ConfigError, describeConfig, loadConfig } from '@custos/service-kit';
import { mailConfigShape } from './mail-config';

describe('mailConfigShape', () => {
  it('has defaults for the sender and the public base URL', () => {
    expect(loadConfig(mailConfigShape, {})).toEqual({
      SMTP_URL: undefined,
      SMTP_ALLOW_INSECURE: false,
      MAIL_DIR: undefined,
      MAIL_FROM: 'Custos <no-reply@custos.local>',
      PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
    });
  });

  it('accepts smtp and smtps URLs and drops a trailing slash from the base URL', () => {
    const c = loadConfig(mailConfigShape, {
      SMTP_URL: 'smtps://u:p@mail.example.org:465',
      PUBLIC_BASE_URL: 'https://custos.example.org/',
    });
    expect(c.SMTP_URL).toBe('smtps://u:p@mail.example.org:465');
    expect(c.PUBLIC_BASE_URL).toBe('https://custos.example.org');
  });

  it('refuses other schemes', () => {
    expect(() => loadConfig(mailConfigShape, { SMTP_URL: 'http://mail.example.org' })).toThrow(ConfigError);
    expect(() => loadConfig(mailConfigShape, { PUBLIC_BASE_URL: 'ftp://x' })).toThrow(ConfigError);
  });

  it('describes every variable', () => {
    const docs = describeConfig(mailConfigShape);
    expect(docs.map((d) => d.variable)).toEqual([
      'SMTP_URL',
      'SMTP_ALLOW_INSECURE',
      'MAIL_DIR',
      'MAIL_FROM',
      'PUBLIC_BASE_URL',
    ]);
    for (const d of docs) expect(d.description.length).toBeGreaterThan(20);
    expect(docs.find((d) => d.variable === 'PUBLIC_BASE_URL')).toMatchObject({
      required: false,
      default: 'http://127.0.0.1:8080',
    });
    expect(docs.find((d) => d.variable === 'SMTP_URL')?.required).toBe(false);
  });
});
