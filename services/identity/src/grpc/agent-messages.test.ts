import type { ActionApprovalPolicy as PolicyMessage } from '@custos/proto/custos/identity/v1/agents';
import { DEFAULT_AGENT_SETTINGS, checkAgentChange } from '../agents/agent-fns';
import { settingsFromStored, settingsToStored } from '../agents/agent-settings-fns';
import type { Agent } from '../agents/agent-types';
import { agentChangeOf, agentMessage } from './agent-messages';

/** A condition message with every list empty, as the wire carries it. */
const cond = (c: Partial<PolicyMessage['rules'][number]['conditions'][number]> & { type: string }) => ({
  chains: [],
  addresses: [],
  selectors: [],
  intentTypes: [],
  actions: [],
  actionKinds: [],
  ...c,
});

const POLICY: PolicyMessage = {
  rules: [
    {
      conditions: [cond({ type: 'value_above', thresholdWei: '1000000000000000000' })],
      riskTier: 3,
      approval: {
        minApprovals: 2,
        requiredRoles: ['admin'],
        perRoleMinimums: { admin: 1 },
        requireCredentialTypes: ['totp'],
      },
      expirySecs: '3600',
      selfApprovalAllowed: true,
      skipWhen: [
        {
          conditions: [
            cond({ type: 'to_address_in', addresses: ['0xAbC0000000000000000000000000000000000001'] }),
          ],
        },
        {
          conditions: [
            cond({ type: 'chain_in', chains: ['anvil'] }),
            cond({ type: 'value_above', thresholdGwei: '5' }),
          ],
        },
      ],
      requireWhen: [
        {
          conditions: [
            cond({ type: 'function_selector_in', selectors: ['0xa9059cbb'] }),
            cond({ type: 'erc20_amount_above', thresholdRaw: '1000000' }),
          ],
        },
      ],
    },
    // A rule that sets none of the new fields answers them as the proto's empties.
    { conditions: [cond({ type: 'always' })], riskTier: 1, skipWhen: [], requireWhen: [] },
  ],
};

function agentWith(settings: Agent['settings']): Agent {
  const at = new Date('2030-01-01T00:00:00Z');
  return {
    id: '11111111-1111-4111-8111-111111111111',
    orgId: '22222222-2222-4222-8222-222222222222',
    name: 'a',
    description: '',
    isActive: true,
    createdBy: '33333333-3333-4333-8333-333333333333',
    createdAt: at,
    updatedAt: at,
    lastActiveAt: null,
    settings,
  };
}

describe('action_approval_policy through the agent messages', () => {
  it('keeps self_approval_allowed, skip_when and require_when from the request to the stored row and back', () => {
    const change = checkAgentChange(
      agentChangeOf({
        name: 'a',
        actionApprovalPolicy: POLICY,
        clearedFields: [],
        perChainGuardrails: undefined,
      } as unknown as Parameters<typeof agentChangeOf>[0]),
      'create',
    );
    const stored = settingsToStored({ ...DEFAULT_AGENT_SETTINGS, ...change.settings });
    // The row keeps API names, sets as {conditions: [...]}, and only the fields each condition reads.
    const storedRule = (stored['action_approval_policy'] as { rules: Array<Record<string, unknown>> })
      .rules[0]!;
    expect(storedRule).toMatchObject({
      self_approval_allowed: true,
      skip_when: [
        {
          conditions: [{ type: 'to_address_in', addresses: ['0xAbC0000000000000000000000000000000000001'] }],
        },
        {
          conditions: [
            { type: 'chain_in', chains: ['anvil'] },
            { type: 'value_above', threshold_gwei: 5 },
          ],
        },
      ],
      require_when: [
        {
          conditions: [
            { type: 'function_selector_in', selectors: ['0xa9059cbb'] },
            { type: 'erc20_amount_above', threshold_raw: '1000000' },
          ],
        },
      ],
    });
    const second = (stored['action_approval_policy'] as { rules: Array<Record<string, unknown>> }).rules[1]!;
    expect(Object.keys(second).sort()).toEqual(['conditions', 'risk_tier']);

    // Through JSON, as the jsonb column gives it back.
    const read = settingsFromStored(JSON.parse(JSON.stringify(stored)) as Record<string, unknown>);
    expect(agentMessage(agentWith(read)).actionApprovalPolicy).toEqual(POLICY);
  });

  it('reads rows written before the new fields as rules without them', () => {
    const read = settingsFromStored({
      action_approval_policy: { rules: [{ conditions: [{ type: 'always' }], risk_tier: 2 }] },
    });
    const rule = agentMessage(agentWith(read)).actionApprovalPolicy!.rules[0]!;
    expect(rule.selfApprovalAllowed).toBeUndefined();
    expect(rule.skipWhen).toEqual([]);
    expect(rule.requireWhen).toEqual([]);
    // Malformed stored sets are left out rather than read as sets that match everything.
    const odd = settingsFromStored({
      action_approval_policy: {
        rules: [
          {
            conditions: [{ type: 'always' }],
            risk_tier: 2,
            self_approval_allowed: 'yes',
            skip_when: [{ conditions: [] }, 'x', { conditions: [{ type: 'always' }] }],
            require_when: { conditions: [] },
          },
        ],
      },
    });
    expect(odd.actionApprovalPolicy!.rules[0]).toEqual({
      conditions: [{ type: 'always' }],
      riskTier: 2,
      skipWhen: [{ conditions: [{ type: 'always' }] }],
    });
  });
});
