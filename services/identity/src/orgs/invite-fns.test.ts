import { inviterName, parseInviteRole } from './invite-fns';

describe('invite fns', () => {
  it('defaults the role to member, accepts admin, and refuses owner and anything else', () => {
    expect(parseInviteRole(undefined)).toBe('member');
    expect(parseInviteRole('')).toBe('member');
    expect(parseInviteRole('admin')).toBe('admin');
    for (const bad of ['owner', 'superuser', 1, {}]) {
      expect(() => parseInviteRole(bad)).toThrow(expect.objectContaining({ field: 'role' }));
    }
  });

  it('names the inviter by display name, else by address', () => {
    expect(inviterName({ displayName: ' Ada ', email: 'ada@example.com' })).toBe('Ada');
    expect(inviterName({ displayName: '', email: 'ada@example.com' })).toBe('ada@example.com');
  });
});
