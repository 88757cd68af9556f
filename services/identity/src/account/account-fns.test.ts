import type { Principal } from '@custos/auth';
import { InvalidArgumentError, PermissionDeniedError } from '@custos/service-kit';
import {
  REAUTH_LOCK_MS,
  featureLimit,
  msUntilPastRevocation,
  normalizePurpose,
  quotaWindowStart,
  reauthLockRemainingMs,
  requireUser,
  stepUpMethodOf,
  tombstoneEmail,
} from './account-fns';

const base = { orgId: 'o', tokenId: 't', issuedAt: 0, expiresAt: 0, issuer: 'i' };

describe('requireUser', () => {
  it('passes users and refuses agents with 403', () => {
    const user: Principal = {
      ...base,
      kind: 'user',
      userId: 'u',
      role: 'owner',
      platformAdmin: false,
      requirePasskeyForVaults: false,
      amr: [],
    };
    expect(requireUser(user)).toBe(user);
    const agent: Principal = {
      ...base,
      kind: 'agent',
      agentId: 'a',
      scopes: [],
      vaultIds: [],
      intentsApiEnabled: false,
      proxyEnabled: false,
    };
    expect(() => requireUser(agent)).toThrow(PermissionDeniedError);
  });
});

describe('normalizePurpose', () => {
  it('accepts dotted lower-case words', () => {
    for (const p of ['account.delete', 'security.passkey.register', 'security.vault_passkey.disable', 'x'])
      expect(normalizePurpose(p)).toBe(p);
  });

  it('refuses missing, malformed and over-long purposes naming the field', () => {
    for (const p of [
      undefined,
      '',
      42,
      'Account.delete',
      'account..delete',
      '.x',
      'x.',
      'a b',
      'a'.repeat(65),
    ]) {
      expect(() => normalizePurpose(p)).toThrow(InvalidArgumentError);
      try {
        normalizePurpose(p);
      } catch (err) {
        expect((err as InvalidArgumentError).field).toBe('purpose');
      }
    }
  });
});

describe('reauthLockRemainingMs', () => {
  const now = 10_000_000;
  const at = (msAgo: number) => new Date(now - msAgo);

  it('is open below ten failures in the hour', () => {
    expect(reauthLockRemainingMs([], now)).toBe(0);
    expect(
      reauthLockRemainingMs(
        Array.from({ length: 9 }, (_, i) => at(i * 1000)),
        now,
      ),
    ).toBe(0);
  });

  it('locks for 15 minutes after the tenth failure', () => {
    const ten = Array.from({ length: 10 }, (_, i) => at(i * 1000));
    expect(reauthLockRemainingMs(ten, now)).toBe(REAUTH_LOCK_MS);
    expect(reauthLockRemainingMs(ten, now + REAUTH_LOCK_MS - 1)).toBe(1);
    expect(reauthLockRemainingMs(ten, now + REAUTH_LOCK_MS)).toBe(0);
  });

  it('forgets failures older than an hour', () => {
    const old = [...Array.from({ length: 9 }, () => at(3_600_001)), at(0)];
    expect(reauthLockRemainingMs(old, now)).toBe(0);
  });
});

describe('quotaWindowStart', () => {
  it('is the start of the UTC hour', () => {
    const t = Date.parse('2025-03-04T05:59:59.999Z');
    expect(quotaWindowStart(t).toISOString()).toBe('2025-03-04T05:00:00.000Z');
    expect(quotaWindowStart(Date.parse('2025-03-04T06:00:00.000Z')).toISOString()).toBe(
      '2025-03-04T06:00:00.000Z',
    );
  });
});

describe('featureLimit', () => {
  it('knows voice_brief at 30 an hour', () => {
    expect(featureLimit('voice_brief')).toEqual({ feature: 'voice_brief', limit: 30 });
  });

  it('refuses other features, prototype names included, naming the field', () => {
    for (const f of ['', undefined, 'other', 'constructor', '__proto__', 'toString']) {
      expect(() => featureLimit(f)).toThrow(InvalidArgumentError);
    }
  });
});

describe('tombstoneEmail', () => {
  it('is undeliverable and unique per id', () => {
    expect(tombstoneEmail('1234')).toBe('deleted+1234@invalid');
  });
});

describe('msUntilPastRevocation', () => {
  it('waits to the second after the revocation, rounded up', () => {
    expect(msUntilPastRevocation(100_300, 100_300)).toBe(700);
    expect(msUntilPastRevocation(100_300, 100_900)).toBe(100);
    expect(msUntilPastRevocation(100_300, 101_000)).toBe(0);
    expect(msUntilPastRevocation(100_000, 100_000)).toBe(0);
  });
});

describe('stepUpMethodOf', () => {
  it('reads a rat_ token first, six digits as TOTP only for a TOTP user, anything else as a password', () => {
    expect(stepUpMethodOf('rat_x_y', true, true)).toBe('reauth_token');
    expect(stepUpMethodOf('123456', false, true)).toBe('totp');
    expect(stepUpMethodOf(' 123 456 ', false, true)).toBe('totp');
    expect(stepUpMethodOf('123456', false, false)).toBe('password');
    expect(stepUpMethodOf('1234567', false, true)).toBe('password');
    expect(stepUpMethodOf('Correct-Horse-9-battery', false, true)).toBe('password');
  });
});
