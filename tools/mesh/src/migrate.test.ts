import { DATABASE_SERVICES, databaseRole, derivedRolePassword, roleUrl } from './migrate';

describe('service database roles', () => {
  it('names one role per service with a schema, never the gateway', () => {
    expect(DATABASE_SERVICES).not.toContain('gateway');
    expect(DATABASE_SERVICES).toHaveLength(8);
    expect(databaseRole('vault-crypto')).toBe('custos_vault_crypto');
    expect(databaseRole('webhook-dispatcher')).toBe('custos_webhook_dispatcher');
  });

  it("gives a service the owner's server and database as its own role", () => {
    expect(roleUrl('postgres://postgres@127.0.0.1:5432/custos_e2e_1', 'custos_policy')).toBe(
      'postgres://custos_policy@127.0.0.1:5432/custos_e2e_1',
    );
    expect(
      roleUrl('postgres://postgres:s3cret@db:5432/custos?sslmode=require', 'custos_audit', 'p/w+x'),
    ).toBe('postgres://custos_audit:p%2Fw%2Bx@db:5432/custos?sslmode=require');
  });

  it('derives a stable password per role that is not the owner\u2019s', () => {
    const a = derivedRolePassword('owner-pw', 'custos_identity');
    expect(a).toBe(derivedRolePassword('owner-pw', 'custos_identity'));
    expect(a).not.toBe(derivedRolePassword('owner-pw', 'custos_policy'));
    expect(a).not.toBe(derivedRolePassword('other-pw', 'custos_identity'));
    expect(a).not.toContain('owner-pw');
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});
