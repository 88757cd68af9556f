import { InvalidArgumentError } from '@custos/service-kit';
import {
  MAX_PASSPHRASE_ATTEMPTS,
  allowlistEntry,
  ipAllowed,
  checkIpAllowlist,
  checkShareInput,
  retryAfterSeconds,
  shareState,
} from './share-fns';
import { hashPassphrase, verifyPassphrase } from './share-passphrase';
import type { ShareRequest } from './share-types';

const NOW = new Date('2030-01-01T00:00:00Z');
const IN_A_DAY = '2030-01-02T00:00:00Z';
const ID = '6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01';

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

describe('checkShareInput', () => {
  const link: ShareRequest = { recipientType: 'anyone_with_link', expiresAt: IN_A_DAY };
  it('accepts each recipient type with the fields it needs, and defaults to one open', () => {
    expect(checkShareInput(link, NOW)).toEqual({
      recipientType: 'anyone_with_link',
      recipientId: undefined,
      email: undefined,
      expiresAt: new Date(IN_A_DAY),
      maxAccessCount: 1,
      passphrase: undefined,
      ipAllowlist: undefined,
    });
    expect(
      checkShareInput(
        {
          recipientType: 'external_email',
          email: ' Bob@Example.COM ',
          expiresAt: IN_A_DAY,
          maxAccessCount: 3,
        },
        NOW,
      ),
    ).toMatchObject({ email: 'bob@example.com', maxAccessCount: 3 });
    expect(
      checkShareInput({ recipientType: 'user', recipientId: ID.toUpperCase(), expiresAt: IN_A_DAY }, NOW),
    ).toMatchObject({ recipientId: ID });
    expect(
      checkShareInput(
        {
          recipientType: 'creator',
          expiresAt: IN_A_DAY,
          passphrase: 'correct horse',
          ipAllowlist: ['10.0.0.0/8', '2001:DB8::1'],
        },
        NOW,
      ),
    ).toMatchObject({ passphrase: 'correct horse', ipAllowlist: ['10.0.0.0/8', '2001:db8::1'] });
    expect(checkShareInput({ ...link, ipAllowlist: [] }, NOW).ipAllowlist).toBeUndefined();
  });

  // The gateway refuses wrong types, missing and unknown fields; these are the rules a direct
  // caller meets.
  it.each([
    [{ recipientType: '' }, 'recipient_type'],
    [{ recipientType: 'everyone' }, 'recipient_type'],
    [{ expiresAt: '' }, 'expires_at'],
    [{ expiresAt: 'soon' }, 'expires_at'],
    [{ expiresAt: '2029-12-31T00:00:00Z' }, 'expires_at'],
    [{ expiresAt: '2030-02-01T00:00:01Z' }, 'expires_at'],
    [{ maxAccessCount: 0 }, 'max_access_count'],
    [{ maxAccessCount: 1.5 }, 'max_access_count'],
    [{ maxAccessCount: 1001 }, 'max_access_count'],
    [{ recipientType: 'external_email' }, 'email'],
    [{ recipientType: 'external_email', email: 'not-an-email' }, 'email'],
    [{ email: 'a@b.co' }, 'email'],
    [{ recipientType: 'user' }, 'recipient_id'],
    [{ recipientType: 'agent', recipientId: 'bot' }, 'recipient_id'],
    [{ recipientType: 'creator', recipientId: ID }, 'recipient_id'],
    [{ passphrase: 'short' }, 'passphrase'],
    [{ passphrase: 'p'.repeat(257) }, 'passphrase'],
    [{ ipAllowlist: ['10.0.0.0/33'] }, 'ip_allowlist'],
    [{ ipAllowlist: Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`) }, 'ip_allowlist'],
  ] as Array<[Partial<ShareRequest>, string]>)('refuses %j naming %s', (patch, field) => {
    expect(fieldOf(() => checkShareInput({ ...link, ...patch }, NOW))).toBe(field);
  });
});

describe('IP allowlists', () => {
  it('normalises addresses and CIDRs and refuses anything else', () => {
    expect(allowlistEntry('192.168.1.7', 0)).toBe('192.168.1.7');
    expect(allowlistEntry('2001:0db8:0000::0001/128', 0)).toBe('2001:db8::1');
    expect(allowlistEntry('10.0.0.0/8', 0)).toBe('10.0.0.0/8');
    for (const bad of ['10.0.0.256', '10.0.0.0/8/1', 'host.example', '10.0.0.0/-1', '::/129', '']) {
      expect(fieldOf(() => allowlistEntry(bad, 2))).toBe('ip_allowlist');
    }
    expect(checkIpAllowlist(['10.0.0.1', '10.0.0.1'])).toEqual(['10.0.0.1']);
    expect(checkIpAllowlist(undefined)).toBeUndefined();
  });

  it('matches IPv4, IPv4-mapped IPv6 and IPv6 clients; no address never matches', () => {
    const list = ['203.0.113.0/24', '2001:db8::/32', '198.51.100.7'];
    expect(ipAllowed(list, '203.0.113.99')).toBe(true);
    expect(ipAllowed(list, '::ffff:198.51.100.7')).toBe(true);
    expect(ipAllowed(list, '2001:db8:1::5')).toBe(true);
    expect(ipAllowed(list, '198.51.100.8')).toBe(false);
    expect(ipAllowed(list, '2001:db9::1')).toBe(false);
    expect(ipAllowed(list, undefined)).toBe(false);
    expect(ipAllowed(list, 'garbage')).toBe(false);
  });
});

describe('shareState', () => {
  const base = {
    revokedAt: null,
    declinedAt: null,
    expiresAt: new Date(IN_A_DAY),
    accessCount: 0,
    maxAccessCount: 1,
    passphraseHash: null,
    passphraseAttempts: 0,
  };
  it('names why a share no longer opens, revocation first', () => {
    expect(shareState(base, NOW)).toBe('open');
    expect(shareState({ ...base, revokedAt: NOW, accessCount: 1 }, NOW)).toBe('revoked');
    expect(shareState({ ...base, declinedAt: NOW }, NOW)).toBe('declined');
    expect(shareState({ ...base, expiresAt: NOW }, NOW)).toBe('expired');
    expect(shareState({ ...base, accessCount: 1 }, NOW)).toBe('exhausted');
    const locked = { ...base, passphraseHash: 'h', passphraseAttempts: MAX_PASSPHRASE_ATTEMPTS };
    expect(shareState(locked, NOW)).toBe('locked');
    expect(shareState({ ...locked, passphraseHash: null }, NOW)).toBe('open');
  });
});

describe('retryAfterSeconds', () => {
  it('waits until the oldest creation leaves the 60 s window, at least a second', () => {
    expect(retryAfterSeconds(new Date(NOW.getTime() - 59_500), NOW)).toBe(1);
    expect(retryAfterSeconds(new Date(NOW.getTime() - 10_000), NOW)).toBe(50);
    expect(retryAfterSeconds(new Date(NOW.getTime() - 61_000), NOW)).toBe(1);
  });
});

describe('share passphrases', () => {
  it('hashes with a random salt and verifies only the same passphrase', async () => {
    const a = await hashPassphrase('correct horse battery');
    const b = await hashPassphrase('correct horse battery');
    expect(a).toMatch(/^scrypt\$32768\$8\$3\$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('correct');
    await expect(verifyPassphrase('correct horse battery', a)).resolves.toBe(true);
    await expect(verifyPassphrase('correct horse batterY', a)).resolves.toBe(false);
    await expect(verifyPassphrase('correct horse battery', 'argon2$x')).resolves.toBe(false);
  });
});
