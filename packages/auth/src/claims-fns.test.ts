import { principalFromClaims } from './claims-fns';
import { InvalidTokenError, type TokenRejectionReason } from './token-errors';

const NOW = 1_735_689_600;
const USER = '0B6F1C1E-7C39-4D8E-9A51-6F0A3E0F1A01';
const AGENT = '5d2e9a40-3b7c-4f11-8e2a-9c4d1b7e2f02';
const ORG = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03';
const VAULT = 'c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e04';

const base = {
  iss: 'https://custos.example',
  aud: 'custos-api',
  org: ORG,
  token_use: 'access',
  jti: 'j1',
  iat: NOW,
  exp: NOW + 900,
};
const user = { ...base, sub: `user:${USER}`, role: 'member' };
const agent = { ...base, sub: `agent:${AGENT}`, scopes: [], vault_ids: [VAULT] };

function reason(claims: Record<string, unknown>): TokenRejectionReason | undefined {
  try {
    principalFromClaims(claims, NOW, 5);
    return undefined;
  } catch (err) {
    if (err instanceof InvalidTokenError) return err.reason;
    throw err;
  }
}

describe('principalFromClaims', () => {
  it('maps the minimal user token, with defaults for optional claims and lower-cased ids', () => {
    expect(principalFromClaims(user, NOW, 5)).toEqual({
      kind: 'user',
      userId: USER.toLowerCase(),
      orgId: ORG,
      role: 'member',
      platformAdmin: false,
      requirePasskeyForVaults: false,
      amr: [],
      tokenId: 'j1',
      issuedAt: NOW,
      expiresAt: NOW + 900,
      issuer: 'https://custos.example',
    });
  });

  it('maps pkv to requirePasskeyForVaults', () => {
    expect(principalFromClaims({ ...user, pkv: true }, NOW, 5)).toMatchObject({
      requirePasskeyForVaults: true,
    });
  });

  it('maps the minimal agent token with feature flags off', () => {
    expect(principalFromClaims(agent, NOW, 5)).toEqual({
      kind: 'agent',
      agentId: AGENT,
      orgId: ORG,
      scopes: [],
      vaultIds: [VAULT],
      intentsApiEnabled: false,
      proxyEnabled: false,
      tokenId: 'j1',
      issuedAt: NOW,
      expiresAt: NOW + 900,
      issuer: 'https://custos.example',
    });
  });

  it('does not keep a reference to the claims it was given', () => {
    const claims = { ...agent, scopes: ['a'], proxy_config: { x: 1 } };
    const p = principalFromClaims(claims, NOW, 5);
    claims.scopes.push('b');
    claims.proxy_config.x = 2;
    expect(p).toMatchObject({ scopes: ['a'], proxyConfig: { x: 1 } });
  });

  it('tolerates an iat up to the clock tolerance ahead', () => {
    expect(reason({ ...user, iat: NOW + 5 })).toBeUndefined();
    expect(reason({ ...user, iat: NOW + 6 })).toBe('issued_in_future');
  });

  it.each<[string, Record<string, unknown>, TokenRejectionReason]>([
    ['token_use refresh', { ...user, token_use: 'refresh' }, 'wrong_token_use'],
    ['token_use absent', { ...user, token_use: undefined }, 'wrong_token_use'],
    ['exp not after iat', { ...user, exp: NOW }, 'invalid_claims'],
    ['fractional iat', { ...user, iat: NOW + 0.5 }, 'invalid_claims'],
    ['jti empty', { ...user, jti: '' }, 'invalid_claims'],
    ['jti too long', { ...user, jti: 'j'.repeat(129) }, 'invalid_claims'],
    ['jti a number', { ...user, jti: 7 }, 'invalid_claims'],
    ['sub missing', { ...user, sub: undefined }, 'invalid_claims'],
    ['sub uuid with trailing text', { ...user, sub: `user:${USER}x` }, 'invalid_claims'],
    ['sub with an upper-case kind', { ...user, sub: `User:${USER}` }, 'invalid_claims'],
    ['org missing', { ...user, org: undefined }, 'invalid_claims'],
    ['user platform_admin not boolean', { ...user, platform_admin: 'yes' }, 'invalid_claims'],
    ['user pkv not boolean', { ...user, pkv: 1 }, 'invalid_claims'],
    ['agent carrying pkv', { ...agent, pkv: true }, 'invalid_claims'],
    ['user amr not an array', { ...user, amr: 'pwd' }, 'invalid_claims'],
    ['user sid empty', { ...user, sid: '' }, 'invalid_claims'],
    ['user carrying proxy_config', { ...user, proxy_config: {} }, 'invalid_claims'],
    ['user carrying router_key', { ...user, router_key: { id: 'rk' } }, 'invalid_claims'],
    ['user carrying scopes', { ...user, scopes: ['*'] }, 'invalid_claims'],
    ['agent carrying a role', { ...agent, role: 'owner' }, 'invalid_claims'],
    ['agent scopes missing', { ...agent, scopes: undefined }, 'invalid_claims'],
    ['agent vault_ids a string', { ...agent, vault_ids: VAULT }, 'invalid_claims'],
    ['agent proxy_config an array', { ...agent, proxy_config: [] }, 'invalid_claims'],
    ['agent proxy_config null', { ...agent, proxy_config: null }, 'invalid_claims'],
    ['agent proxy_enabled a string', { ...agent, proxy_enabled: 'true' }, 'invalid_claims'],
    ['agent environment a number', { ...agent, environment: 1 }, 'invalid_claims'],
    ['agent created_by not a uuid', { ...agent, created_by: 'alice' }, 'invalid_claims'],
    ['router_key without id', { ...agent, router_key: { max_concurrent_streams: 1 } }, 'invalid_claims'],
    [
      'router_key streams zero',
      { ...agent, router_key: { id: 'rk', max_concurrent_streams: 0 } },
      'invalid_claims',
    ],
    [
      'router_key cap negative',
      { ...agent, router_key: { id: 'rk', spend_cap_micro_usd: -1 } },
      'invalid_claims',
    ],
    ['router_key a string', { ...agent, router_key: 'rk' }, 'invalid_claims'],
  ])('refuses %s', (_name, claims, expected) => {
    expect(reason(claims)).toBe(expected);
  });
});
