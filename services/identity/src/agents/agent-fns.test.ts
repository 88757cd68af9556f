import { InvalidArgumentError } from '@custos/service-kit';
import {
  DEFAULT_AGENT_SETTINGS,
  agentAccess,
  agentTokenTtl,
  changedFieldNames,
  checkAgentChange,
  GUARDRAIL_SETTINGS,
  SETTING_NAMES,
  narrowsTokenClaims,
  touchesGuardrails,
} from './agent-fns';
import { settingsFromStored, settingsToStored } from './agent-settings-fns';

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
    const s = { ...DEFAULT_AGENT_SETTINGS, vaultIds: [A] };
    expect(agentAccess(s, { scopes: [], vaultIds: [B, A] }).vaultIds).toEqual([A, B]);
  });
});

describe('checkAgentChange', () => {
  const fieldOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err instanceof InvalidArgumentError ? err.field : 'not a 400';
    }
    return undefined;
  };

  it('requires a name on create and trims it', () => {
    expect(fieldOf(() => checkAgentChange({ settings: {} }, 'create'))).toBe('name');
    expect(checkAgentChange({ name: '  bot ', settings: {} }, 'create').name).toBe('bot');
    expect(fieldOf(() => checkAgentChange({ name: '   ', settings: {} }, 'update'))).toBe('name');
  });

  it('names the field a direct caller got wrong', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    const cases: Array<[Parameters<typeof checkAgentChange>[0]['settings'], string]> = [
      [{ tokenTtlSeconds: 5 }, 'token_ttl_seconds'],
      [{ federatedTokenTtlSeconds: 7200 }, 'federated_token_ttl_seconds'],
      [{ environment: 'staging' as 'custom' }, 'environment'],
      [{ addressScreeningPolicy: { mode: 'sometimes' as 'off' } }, 'address_screening_policy.mode'],
      [{ scopes: ['ok/*', 'no spaces'] }, 'scopes[1]'],
      [{ vaultIds: ['nope'] }, 'vault_ids[0]'],
      [{ apiKeyExpiresAt: '2029-12-31T23:59:59Z' }, 'api_key_expires_at'],
      [{ apiKeyExpiresAt: 'tomorrow' }, 'api_key_expires_at'],
    ];
    for (const [settings, field] of cases) {
      expect(fieldOf(() => checkAgentChange({ name: 'x', settings }, 'create', now))).toBe(field);
    }
    expect(fieldOf(() => checkAgentChange({ isActive: true, settings: {} }, 'update'))).toBeUndefined();
    expect(fieldOf(() => checkAgentChange({ name: 'x', isActive: true, settings: {} }, 'create'))).toBe(
      'is_active',
    );
  });

  it('lists the API names of the fields a change sets, sorted', () => {
    expect(
      changedFieldNames({ description: 'd', settings: { tokenTtlSeconds: 60, usdcDailyLimitUsd: null } }),
    ).toEqual(['description', 'token_ttl_seconds', 'usdc_daily_limit_usd']);
  });

  it('caps the token lifetime at the key expiry', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    const s = { ...DEFAULT_AGENT_SETTINGS, apiKeyExpiresAt: '2030-01-01T00:01:30Z' };
    expect(agentTokenTtl(s, now)).toBe(90);
    expect(agentTokenTtl(DEFAULT_AGENT_SETTINGS, now)).toBe(3600);
  });
});

describe('stored settings', () => {
  it('round-trips every setting under its API name', () => {
    const s = {
      ...DEFAULT_AGENT_SETTINGS,
      scopes: ['deploy/**'],
      proxyConfig: { allowed_models: ['m'], camelCase: 1 },
      perChainGuardrails: { ethereum: { gasDailyBudgetNative: '0.5', toAllowlist: ['0xab'] } },
      actionApprovalPolicy: {
        rules: [
          {
            conditions: [{ type: 'chain_in' as const, chains: ['base'] }],
            riskTier: 2,
            approval: { minApprovals: 2, perRoleMinimums: { admin: 1 } },
          },
        ],
      },
      usdcDailyLimitUsd: 25,
    };
    const stored = settingsToStored(s);
    expect(stored).toMatchObject({
      scopes: ['deploy/**'],
      usdc_daily_limit_usd: 25,
      proxy_config: { allowed_models: ['m'], camelCase: 1 },
      per_chain_guardrails: { ethereum: { gas_daily_budget_native: '0.5', to_allowlist: ['0xab'] } },
      action_approval_policy: {
        rules: [
          {
            conditions: [{ type: 'chain_in', chains: ['base'] }],
            risk_tier: 2,
            approval: { min_approvals: 2, per_role_minimums: { admin: 1 } },
          },
        ],
      },
    });
    expect(settingsFromStored(JSON.parse(JSON.stringify(stored)) as Record<string, unknown>)).toEqual(s);
  });

  it('reads rows written before a setting existed or was typed', () => {
    const s = settingsFromStored({
      vault_ids: [A],
      execution_guardrails: { enforcement: 'enforce', extra: 1 },
      per_chain_guardrails: { base: { gas_daily_budget_native: '1', colour: 'blue' } },
    });
    expect(s).toEqual({
      ...DEFAULT_AGENT_SETTINGS,
      vaultIds: [A],
      executionGuardrails: { enforcement: 'enforce' },
      perChainGuardrails: { base: { gasDailyBudgetNative: '1' } },
    });
  });
});

describe('narrowsTokenClaims', () => {
  const base = {
    ...DEFAULT_AGENT_SETTINGS,
    scopes: ['app/*', 'db/*'],
    vaultIds: [A],
    intentsApiEnabled: true,
  };
  const with_ = (s: Partial<typeof base>) => ({ ...base, ...s });

  it('is false when nothing a token carries changes or only widens', () => {
    expect(narrowsTokenClaims(base, base)).toBe(false);
    expect(narrowsTokenClaims(base, with_({ scopes: ['app/*', 'db/*', 'more/*'] }))).toBe(false);
    expect(narrowsTokenClaims(base, with_({ vaultIds: [A, B] }))).toBe(false);
    expect(narrowsTokenClaims(with_({ intentsApiEnabled: false }), base)).toBe(false);
    // The lifetime is not a claim: a shorter one applies to tokens minted next.
    expect(narrowsTokenClaims(base, with_({ tokenTtlSeconds: 60 }))).toBe(false);
  });

  it('is true when a scope, a vault or a flag is taken away, or the environment changes', () => {
    expect(narrowsTokenClaims(base, with_({ scopes: ['app/*'] }))).toBe(true);
    expect(narrowsTokenClaims(base, with_({ scopes: null }))).toBe(true);
    expect(narrowsTokenClaims(with_({ scopes: null }), base)).toBe(true);
    expect(narrowsTokenClaims(base, with_({ vaultIds: [B] }))).toBe(true);
    expect(narrowsTokenClaims(base, with_({ intentsApiEnabled: false }))).toBe(true);
    expect(narrowsTokenClaims(base, with_({ environment: 'preview' }))).toBe(true);
    expect(narrowsTokenClaims(with_({ proxyEnabled: true }), base)).toBe(true);
  });
});

describe('touchesGuardrails', () => {
  it('is true for a change that sets or clears a guardrail, false for other settings', () => {
    expect(touchesGuardrails({})).toBe(false);
    expect(touchesGuardrails({ scopes: ['secrets:read'], environment: 'production' })).toBe(false);
    expect(touchesGuardrails({ txMaxValueEth: null })).toBe(true);
    expect(touchesGuardrails({ executionGuardrails: { enforcement: 'enforce' } })).toBe(true);
    // Opening a signing path or dropping a TEE requirement widens what the agent may sign.
    expect(touchesGuardrails({ rawSigningEnabled: true })).toBe(true);
    expect(touchesGuardrails({ intentsRequireTee: false })).toBe(true);
    expect(touchesGuardrails({ proxyEnabled: true, federationEnabled: true })).toBe(false);
    for (const k of GUARDRAIL_SETTINGS) expect(touchesGuardrails({ [k]: null })).toBe(true);
    // Named as the API names them: the gateway's list (agent-schemas.ts) uses these names.
    expect(GUARDRAIL_SETTINGS.map((k) => SETTING_NAMES[k])).toEqual([
      'intents_api_enabled',
      'message_signing_enabled',
      'raw_signing_enabled',
      'execution_intents_enabled',
      'intents_require_tee',
      'execution_require_tee',
      'action_approval_policy',
      'address_screening_policy',
      'execution_guardrails',
      'per_chain_guardrails',
      'tx_max_value_eth',
      'tx_daily_limit_eth',
      'tx_max_per_day',
      'max_fee_per_gas_gwei',
      'max_gas_limit',
      'tx_to_allowlist',
      'tx_allowed_chains',
      'eip712_domain_allowlist',
      'eip712_default_policy',
      'usdc_daily_limit_usd',
      'usd_daily_limit_usd',
    ]);
  });
});
