import {
  type MemberChange,
  normalizeOrgName,
  parseRole,
  parseUuid,
  msUntilPastRevocation,
  removalRefusal,
  roleChangeRefusal,
  tombstoneEmail,
} from './org-fns';

const base: MemberChange = { callerRole: 'owner', self: false, targetRole: 'member', ownerCount: 1 };

describe('roleChangeRefusal', () => {
  it('lets owners set any role and admins manage members and admins', () => {
    expect(roleChangeRefusal(base, 'owner')).toBeUndefined();
    expect(roleChangeRefusal(base, 'admin')).toBeUndefined();
    expect(roleChangeRefusal({ ...base, callerRole: 'admin' }, 'admin')).toBeUndefined();
    expect(
      roleChangeRefusal({ ...base, callerRole: 'admin', targetRole: 'admin' }, 'member'),
    ).toBeUndefined();
  });

  it('refuses members (403)', () => {
    expect(roleChangeRefusal({ ...base, callerRole: 'member' }, 'member')?.httpStatus).toBe(403);
  });

  it('refuses an admin touching an owner or granting owner (403)', () => {
    const touch = roleChangeRefusal(
      { ...base, callerRole: 'admin', targetRole: 'owner', ownerCount: 2 },
      'admin',
    );
    expect(touch?.httpStatus).toBe(403);
    expect(touch?.detail).toMatch(/owner's role/);
    const grant = roleChangeRefusal({ ...base, callerRole: 'admin' }, 'owner');
    expect(grant?.httpStatus).toBe(403);
  });

  it('refuses demoting the last owner (409), also oneself, but not one of two', () => {
    const last = { ...base, targetRole: 'owner' as const, self: true, ownerCount: 1 };
    expect(roleChangeRefusal(last, 'admin')?.httpStatus).toBe(409);
    expect(roleChangeRefusal(last, 'owner')).toBeUndefined();
    expect(roleChangeRefusal({ ...last, ownerCount: 2 }, 'member')).toBeUndefined();
  });
});

describe('removalRefusal', () => {
  it('lets owners remove anyone else and admins remove non-owners', () => {
    expect(removalRefusal(base)).toBeUndefined();
    expect(removalRefusal({ ...base, targetRole: 'owner', ownerCount: 2 })).toBeUndefined();
    expect(removalRefusal({ ...base, callerRole: 'admin', targetRole: 'admin' })).toBeUndefined();
  });

  it('refuses members, self-removal and admins removing owners (403), and the last owner (409)', () => {
    expect(removalRefusal({ ...base, callerRole: 'member' })?.httpStatus).toBe(403);
    expect(removalRefusal({ ...base, self: true, targetRole: 'owner', ownerCount: 2 })?.httpStatus).toBe(403);
    expect(
      removalRefusal({ ...base, callerRole: 'admin', targetRole: 'owner', ownerCount: 2 })?.httpStatus,
    ).toBe(403);
    expect(removalRefusal({ ...base, targetRole: 'owner', ownerCount: 1 })?.httpStatus).toBe(409);
  });
});

describe('field parsing', () => {
  it('accepts the three roles and names `role` otherwise', () => {
    expect(parseRole('admin')).toBe('admin');
    for (const bad of ['', 'Owner', 'root', 3, undefined]) {
      expect(() => parseRole(bad)).toThrow(
        expect.objectContaining({ field: 'role', kind: 'invalid_argument' }),
      );
    }
  });

  it('lower-cases UUIDs and names the field of a bad one', () => {
    expect(parseUuid('0F8FAD5B-D9CB-469F-A165-70867728950E', 'user_id')).toBe(
      '0f8fad5b-d9cb-469f-a165-70867728950e',
    );
    expect(() => parseUuid('nope', 'user_id')).toThrow(expect.objectContaining({ field: 'user_id' }));
  });

  it('trims org names and refuses empty, long and control characters', () => {
    expect(normalizeOrgName('  Team A ')).toBe('Team A');
    expect(normalizeOrgName('x'.repeat(128))).toHaveLength(128);
    for (const bad of ['', '   ', 'x'.repeat(129), 'a\nb', 7]) {
      expect(() => normalizeOrgName(bad)).toThrow(expect.objectContaining({ field: 'name' }));
    }
  });

  it('makes an undeliverable, unique tombstone address', () => {
    const id = '0f8fad5b-d9cb-469f-a165-70867728950e';
    expect(tombstoneEmail(id)).toBe(`deleted+${id}@invalid`);
  });
});

describe('msUntilPastRevocation', () => {
  it('waits for the next whole second after the revocation, never negative', () => {
    expect(msUntilPastRevocation(10_250, 10_300)).toBe(700);
    expect(msUntilPastRevocation(10_000, 10_000)).toBe(0);
    expect(msUntilPastRevocation(10_250, 12_000)).toBe(0);
  });
});
