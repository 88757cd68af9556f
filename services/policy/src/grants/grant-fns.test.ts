import { InvalidArgumentError } from '@custos/service-kit';
import { changedFields, grantView, parseGrantChange, parseGrantInput, secretPathPattern } from './grant-fns';

const NOW = new Date('2030-01-01T00:00:00Z');
const AGENT = '11111111-1111-4111-8111-111111111111';

function refusal(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

const valid = {
  secret_path_pattern: 'prod/*',
  principal_type: 'agent',
  principal_id: AGENT,
  permissions: ['read'],
};

describe('secret_path_pattern', () => {
  it.each(['**', '*', 'prod/*', 'prod/**', 'a/**/b', 'a-b_c/D9'])('accepts %j', (p) => {
    expect(secretPathPattern(p)).toBe(p);
  });
  it.each(['', '/a', 'a/', 'a//b', 'db-*', '***', 'a.b', 'a b', 'x'.repeat(513), 7, null])(
    'refuses %j',
    (p) => {
      expect(refusal(() => secretPathPattern(p))).toBe('secret_path_pattern');
    },
  );
});

describe('parseGrantInput', () => {
  it('fills the defaults of effect, priority, conditions and expiry', () => {
    expect(parseGrantInput({ ...valid, permissions: ['write', 'read', 'read'] }, NOW)).toEqual({
      secretPathPattern: 'prod/*',
      principalType: 'agent',
      principalId: AGENT,
      permissions: ['read', 'write'],
      conditions: {},
      effect: 'allow',
      priority: 0,
      expiresAt: null,
    });
  });
  it('takes every optional field', () => {
    const g = parseGrantInput(
      {
        ...valid,
        principal_id: AGENT.toUpperCase(),
        effect: 'deny',
        priority: 10,
        expires_at: '2030-02-01T00:00:00Z',
        conditions: { ip_cidrs: ['10.0.0.0/8'] },
      },
      NOW,
    );
    expect(g).toMatchObject({
      principalId: AGENT,
      effect: 'deny',
      priority: 10,
      expiresAt: new Date('2030-02-01T00:00:00Z'),
      conditions: { ip_cidrs: ['10.0.0.0/8'] },
    });
  });
  it.each([
    [{ secret_path_pattern: undefined }, 'secret_path_pattern'],
    [{ principal_type: 'group' }, 'principal_type'],
    [{ principal_type: undefined }, 'principal_type'],
    [{ principal_id: 'bob' }, 'principal_id'],
    [{ permissions: [] }, 'permissions'],
    [{ permissions: ['read', 'delete'] }, 'permissions'],
    [{ permissions: 'read' }, 'permissions'],
    [{ effect: 'maybe' }, 'effect'],
    [{ priority: -1 }, 'priority'],
    [{ priority: 1.5 }, 'priority'],
    [{ priority: '3' }, 'priority'],
    [{ priority: 1_000_001 }, 'priority'],
    [{ expires_at: 'tomorrow' }, 'expires_at'],
    [{ expires_at: '2029-12-31T23:59:59Z' }, 'expires_at'],
    [{ conditions: { ip_cidrs: ['nope'] } }, 'conditions.ip_cidrs'],
    [{ colour: 'red' }, 'colour'],
    [{ tx_conditions: {} }, 'tx_conditions'],
  ])('refuses %j naming %s', (patch, field) => {
    expect(refusal(() => parseGrantInput({ ...valid, ...patch }, NOW))).toBe(field);
  });
});

describe('parseGrantChange', () => {
  it('keeps only the fields present; null resets to the default', () => {
    expect(parseGrantChange({ priority: 5 }, 'agent', NOW)).toEqual({ priority: 5 });
    const c = parseGrantChange({ expires_at: null, conditions: null, effect: null }, 'agent', NOW);
    expect(c).toEqual({ expiresAt: null, conditions: {}, effect: 'allow' });
    expect(changedFields(c)).toEqual(['conditions', 'effect', 'expires_at']);
    expect(parseGrantChange({}, 'user', NOW)).toEqual({});
  });
  it.each([
    [{ principal_id: AGENT }, 'principal_id'],
    [{ principal_type: 'user' }, 'principal_type'],
    [{ permissions: [] }, 'permissions'],
    [{ secret_path_pattern: 'a//b' }, 'secret_path_pattern'],
    [{ conditions: { environment_in: ['production'] } }, 'conditions.environment_in'],
    [{ name: 'x' }, 'name'],
  ])('refuses %j naming %s', (fields, field) => {
    expect(refusal(() => parseGrantChange(fields, 'user', NOW))).toBe(field);
  });
});

describe('grantView', () => {
  it('renders the HTTP shape with ISO times and null expiry', () => {
    const at = new Date('2030-01-01T00:00:00Z');
    expect(
      grantView({
        id: 'g',
        orgId: 'o',
        vaultId: 'v',
        secretPathPattern: '**',
        principalType: 'user',
        principalId: 'u',
        permissions: ['read'],
        conditions: {},
        effect: 'allow',
        priority: 0,
        expiresAt: null,
        createdBy: 'c',
        createdAt: at,
        updatedAt: at,
      }),
    ).toEqual({
      id: 'g',
      vault_id: 'v',
      secret_path_pattern: '**',
      principal_type: 'user',
      principal_id: 'u',
      permissions: ['read'],
      conditions: {},
      effect: 'allow',
      priority: 0,
      expires_at: null,
      created_by: 'c',
      created_by_type: 'user',
      created_at: '2030-01-01T00:00:00.000Z',
      updated_at: '2030-01-01T00:00:00.000Z',
    });
  });
});
