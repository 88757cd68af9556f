import { DEFAULT_AGENT_SETTINGS, agentAccess } from './agent-fns';

const A = '11111111-1111-4111-8111-111111111111';
const B = '22222222-2222-4222-8222-222222222222';

describe('agentAccess', () => {
  it('takes the grants’ patterns when the agent has no explicit scopes', () => {
    const s = { ...DEFAULT_AGENT_SETTINGS, scopes: null };
    expect(agentAccess(s, { scopes: ['db/*', 'db/*', 'api/**'], vaultIds: [A] })).toEqual({
      scopes: ['db/*', 'api/**'],
      vaultIds: [A],
    });
  });

  it('keeps explicit scopes over the grants’ patterns', () => {
    const s = { ...DEFAULT_AGENT_SETTINGS, scopes: ['only/this'] };
    expect(agentAccess(s, { scopes: ['db/*'], vaultIds: [] }).scopes).toEqual(['only/this']);
  });

  it('gives no access with neither explicit scopes nor grants', () => {
    expect(agentAccess({ ...DEFAULT_AGENT_SETTINGS, scopes: null }, { scopes: [], vaultIds: [] })).toEqual({
      scopes: [],
      vaultIds: [],
    });
  });

  it('joins the vaults of the settings and of the grants once each', () => {
    const s = { ...DEFAULT_AGENT_SETTINGS, vault_ids: [A] };
    expect(agentAccess(s, { scopes: [], vaultIds: [B, A] }).vaultIds).toEqual([A, B]);
  });
});
