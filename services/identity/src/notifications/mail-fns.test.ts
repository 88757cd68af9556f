import { ConfigError } from '@custos/service-kit';
import { emlFileName, recipientDomain, smtpOptionsFromUrl, unencodedBody } from './mail-fns';

describe('smtpOptionsFromUrl', () => {
  it('reads host, port, TLS mode and percent-decoded credentials', () => {
    expect(smtpOptionsFromUrl('smtp://mailer:p%40ss%3Aw%2Frd@mail.example.org:2525')).toMatchObject({
      host: 'mail.example.org',
      port: 2525,
      secure: false,
      auth: { user: 'mailer', pass: 'p@ss:w/rd' },
    });
    expect(smtpOptionsFromUrl('smtps://u:p@mail.example.org')).toMatchObject({ port: 465, secure: true });
    expect(smtpOptionsFromUrl('smtp://mail.example.org')).toMatchObject({ port: 587, secure: false });
    expect(smtpOptionsFromUrl('smtp://mail.example.org').auth).toBeUndefined();
    expect(smtpOptionsFromUrl('smtp://[::1]:25').host).toBe('::1');
  });

  it('bounds every wait and forbids file and URL access', () => {
    expect(smtpOptionsFromUrl('smtp://h')).toMatchObject({
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
      disableFileAccess: true,
      disableUrlAccess: true,
    });
  });

  it('requires TLS and a verified certificate: STARTTLS for smtp, TLS from the first byte for smtps', () => {
    expect(smtpOptionsFromUrl('smtp://h')).toMatchObject({ secure: false, requireTLS: true });
    expect(smtpOptionsFromUrl('smtp://h').tls).toBeUndefined();
    expect(smtpOptionsFromUrl('smtps://h')).toMatchObject({ secure: true });
    expect(smtpOptionsFromUrl('smtps://h?requireTLS=false')).toMatchObject({ secure: true });
    expect(smtpOptionsFromUrl('smtp://h?tls.servername=mail.example.org')).toMatchObject({
      requireTLS: true,
      tls: { servername: 'mail.example.org' },
    });
  });

  it('refuses settings that would send in plaintext or unverified, naming SMTP_URL and SMTP_ALLOW_INSECURE', () => {
    for (const [url, what] of [
      ['smtp://u:hunter2@h?ignoreTLS=true', 'ignoreTLS=true'],
      ['smtp://u:hunter2@h?requireTLS=false', 'requireTLS=false'],
      ['smtps://u:hunter2@h?tls.rejectUnauthorized=false', 'tls.rejectUnauthorized=false'],
    ] as const) {
      try {
        smtpOptionsFromUrl(url);
        throw new Error(`accepted ${url}`);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        const problem = (err as ConfigError).problems[0]!;
        expect(problem.variable).toBe('SMTP_URL');
        expect(problem.reason).toContain(what);
        expect(problem.reason).toContain('SMTP_ALLOW_INSECURE=true');
        expect((err as Error).message).not.toContain('hunter2');
      }
      // Development may.
      expect(() => smtpOptionsFromUrl(url, { allowInsecure: true })).not.toThrow();
    }
    // Allowed, plain smtp is upgraded when offered and sent plain when not.
    expect(smtpOptionsFromUrl('smtp://h', { allowInsecure: true }).requireTLS).toBeUndefined();
  });

  it('takes known options from the query', () => {
    expect(
      smtpOptionsFromUrl(
        'smtp://h?requireTLS=true&socketTimeout=5000&tls.rejectUnauthorized=false&name=custos',
        { allowInsecure: true },
      ),
    ).toMatchObject({
      requireTLS: true,
      socketTimeout: 5000,
      tls: { rejectUnauthorized: false },
      name: 'custos',
    });
  });

  it('refuses other schemes, unknown options and bad values with a ConfigError that hides the password', () => {
    for (const url of [
      'http://u:hunter2@h',
      'smtp://u:hunter2@h?pool=true',
      'smtp://u:hunter2@h?requireTLS=yes',
      'smtp://u:hunter2@h?socketTimeout=-1',
      'smtp://u:%E0%A4%A@h',
      'not a url hunter2',
    ]) {
      try {
        smtpOptionsFromUrl(url);
        throw new Error(`accepted ${url}`);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        expect((err as ConfigError).problems[0]!.variable).toBe('SMTP_URL');
        expect((err as Error).message).not.toContain('hunter2');
      }
    }
  });
});

describe('recipientDomain', () => {
  it('keeps only the lower-cased domain', () => {
    expect(recipientDomain('ada@Example.ORG')).toBe('example.org');
    expect(recipientDomain('Ada Lovelace <ada@example.org>')).toBe('example.org');
    expect(recipientDomain('"odd@name" <x@mail.example.org>')).toBe('mail.example.org');
    expect(recipientDomain('nobody')).toBe('(none)');
  });
});

describe('emlFileName', () => {
  it('sorts by time, then by sequence', () => {
    const a = emlFileName(new Date('2025-01-02T03:04:05.678Z'), 1, 'ffffffff');
    const b = emlFileName(new Date('2025-01-02T03:04:05.678Z'), 2, '00000000');
    const c = emlFileName(new Date('2025-01-02T03:04:05.679Z'), 1, '00000000');
    const d = emlFileName(new Date('2025-10-02T03:04:05.000Z'), 1, '00000000');
    expect(a).toBe('20250102T030405678Z-000001-ffffffff.eml');
    expect([d, c, b, a].sort()).toEqual([a, b, c, d]);
  });
});

describe('unencodedBody', () => {
  it('keeps an ASCII body as 7bit text with CRLF line ends, long lines included', () => {
    const link = `https://custos.example.org/verify-email?token=cse_${'a'.repeat(16)}_${'b'.repeat(43)}`;
    expect(unencodedBody(`Open this:\n\n${link}\n`)).toEqual({
      transferEncoding: '7bit',
      body: `Open this:\r\n\r\n${link}\r\n`,
    });
  });

  it('sends other text as 8bit UTF-8, and gives up on lines longer than 998 bytes', () => {
    expect(unencodedBody('Join "Zoë\'s org"')?.transferEncoding).toBe('8bit');
    expect(unencodedBody(`${'x'.repeat(998)}\nok`)).toBeDefined();
    expect(unencodedBody(`${'ë'.repeat(500)}`)).toBeUndefined();
    expect(unencodedBody('a\u0000b')).toBeUndefined();
  });
});
