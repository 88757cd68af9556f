import { becomesPlatformAdmin, signupRefusal } from './signup-mode-fns';

describe('signupRefusal', () => {
  it('open: every origin, first account or not', () => {
    for (const origin of ['signup', 'google', 'invitation'] as const) {
      expect(signupRefusal('open', origin, true)).toBeUndefined();
      expect(signupRefusal('open', origin, false)).toBeUndefined();
    }
  });

  it('invite: invitations always, signup and Google only for the first account of the install', () => {
    expect(signupRefusal('invite', 'invitation', false)).toBeUndefined();
    expect(signupRefusal('invite', 'signup', true)).toBeUndefined();
    expect(signupRefusal('invite', 'google', true)).toBeUndefined();
    expect(signupRefusal('invite', 'signup', false)).toMatch(/invitation only \(signup mode: invite\)/);
    expect(signupRefusal('invite', 'google', false)).toMatch(/signup mode: invite/);
  });

  it('closed: nothing, not even the first account or an invitation', () => {
    for (const origin of ['signup', 'google', 'invitation'] as const) {
      expect(signupRefusal('closed', origin, true)).toMatch(/no new accounts \(signup mode: closed\)/);
      expect(signupRefusal('closed', origin, false)).toMatch(/signup mode: closed/);
    }
  });
});

describe('becomesPlatformAdmin', () => {
  it('is the first account only, and only when PLATFORM_ADMIN_EMAILS names nobody', () => {
    expect(becomesPlatformAdmin(true, false)).toBe(true);
    expect(becomesPlatformAdmin(false, false)).toBe(false);
    expect(becomesPlatformAdmin(true, true)).toBe(false);
    expect(becomesPlatformAdmin(false, true)).toBe(false);
  });
});
