import type { Principal } from '@custos/auth';
import type { Agent, ApprovalRule } from '@custos/proto/custos/identity/v1/agents';
import {
  type Database,
  InvalidArgumentError,
  type Logger,
  NotFoundError,
  PermissionDeniedError,
  UnavailableError,
} from '@custos/service-kit';
import type { ChainRecord } from '../chains/chain-types.js';
import { evmAdapter } from '../keys/evm-adapter.js';
import type { KeyLoader } from '../keys/key-loader.js';
import type { SigningKeyRecord } from '../keys/key-types.js';
import { IntentContext, withTriggers } from './intent-context.js';

// IntentContext over in-memory fakes of its ports (database, chains, keys, identity): the order of
// the checks (agent → token flag → chain → identity's settings → key → custody) and the record of
// every refusal as `<action>.refused` with its reason, status and field.

const ORG = '22222222-2222-4222-8222-222222222222';
const AGENT = '11111111-1111-4111-8111-111111111111';
const OTHER = '99999999-9999-4999-8999-999999999999';
const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;
const agent = (over: Record<string, unknown> = {}) =>
  ({ kind: 'agent', agentId: AGENT, orgId: ORG, intentsApiEnabled: true, ...over }) as unknown as Principal;
const CHAIN = { name: 'anvil', chainId: 31337n, family: 'evm' } as ChainRecord;
const KEY = { id: '33333333-3333-4333-8333-333333333333', custody: 'server' } as SigningKeyRecord;

function rig(
  opts: {
    chain?: 'unknown' | 'solana';
    settings?: Record<string, unknown>;
    agentMissing?: boolean;
    key?: SigningKeyRecord | null;
    failRecord?: boolean;
    triggers?: ApprovalRule[];
  } = {},
) {
  const steps: string[] = [];
  const records: { action: string; metadata: Record<string, unknown>; resourceId: unknown }[] = [];
  const tx = {
    insert: () => ({
      values: async (v: { name: string; payload: Record<string, unknown> }) => {
        if (opts.failRecord) throw new Error('the outbox is gone');
        records.push({
          action: v.payload['action'] as string,
          metadata: v.payload['metadata'] as Record<string, unknown>,
          resourceId: v.payload['resource_id'],
        });
      },
    }),
  };
  const db = { transaction: async (fn: (t: unknown) => unknown) => fn(tx) } as unknown as Database;
  const ctx = new IntentContext({
    db,
    chains: {
      resolve: async (_ref: string, field: string) => {
        steps.push('chain');
        if (opts.chain === 'unknown') throw new InvalidArgumentError(field, 'is not a known chain');
        return opts.chain === 'solana' ? { ...CHAIN, name: 'solana', family: 'solana' as never } : CHAIN;
      },
    },
    keys: {
      active: async () => {
        steps.push('key');
        return opts.key === null ? undefined : (opts.key ?? KEY);
      },
    },
    adapters: { evm: evmAdapter },
    identity: {
      agentInOrg: async () => {
        steps.push('identity');
        if (opts.agentMissing) throw new NotFoundError('agent', AGENT);
        return { isActive: true, intentsApiEnabled: true, ...opts.settings } as never;
      },
    },
    policy: {
      approvalRulesOf: async (orgId: string, agentId: string) => {
        steps.push(
          `policy ${orgId === ORG && agentId === AGENT ? 'asked for the agent' : 'asked for another'}`,
        );
        return opts.triggers ?? [];
      },
    },
    loader: {} as KeyLoader,
    logger,
  });
  const open = (p: Principal, agentId = AGENT, chainField?: string) =>
    ctx.audited(p, 'agent.sign', agentId, () => ctx.open(p, agentId, 'anvil', chainField));
  return { ctx, open, steps, records };
}

async function refusal(r: ReturnType<typeof rig>, p: Principal, agentId?: string, chainField?: string) {
  const err = await r.open(p, agentId, chainField).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeDefined();
  return err as { kind: string; type: string; field?: string; httpStatus: number };
}

describe('IntentContext.open', () => {
  it('passes an active agent acting for itself, with the flag, on a known chain with a server key', async () => {
    const r = rig();
    const scope = await r.ctx.open(agent(), AGENT, 'anvil');
    expect(scope).toMatchObject({ chain: CHAIN, key: KEY, adapter: evmAdapter });
    expect(r.steps).toEqual(['chain', 'identity', 'policy asked for the agent', 'key']);
    expect(r.records).toEqual([]);
  });

  it.each([
    ['a malformed agent id', () => rig(), agent(), 'not-a-uuid', 'invalid_argument', 'agent_id', []],
    [
      'a human',
      () => rig(),
      { kind: 'user', userId: OTHER, orgId: ORG, role: 'owner' },
      AGENT,
      'intents_agent_only',
      undefined,
      [],
    ],
    ['another agent', () => rig(), agent({ agentId: OTHER }), AGENT, 'intents_other_agent', undefined, []],
    [
      'a token without the flag',
      () => rig(),
      agent({ intentsApiEnabled: false }),
      AGENT,
      'intents_api_disabled',
      undefined,
      [],
    ],
    [
      'an unknown chain',
      () => rig({ chain: 'unknown' }),
      agent(),
      AGENT,
      'invalid_argument',
      'chain',
      ['chain'],
    ],
    [
      'an agent identity no longer knows',
      () => rig({ agentMissing: true }),
      agent(),
      AGENT,
      'not_found',
      undefined,
      ['chain', 'identity', 'policy asked for the agent'],
    ],
    [
      'a deactivated agent',
      () => rig({ settings: { isActive: false } }),
      agent(),
      AGENT,
      'agent_inactive',
      undefined,
      ['chain', 'identity', 'policy asked for the agent'],
    ],
    [
      'the flag turned off since the token',
      () => rig({ settings: { intentsApiEnabled: false } }),
      agent(),
      AGENT,
      'intents_api_disabled',
      undefined,
      ['chain', 'identity', 'policy asked for the agent'],
    ],
    [
      'a chain family with no signer',
      () => rig({ chain: 'solana' }),
      agent(),
      AGENT,
      'invalid_argument',
      'chain',
      ['chain', 'identity', 'policy asked for the agent'],
    ],
    [
      'no key for the family',
      () => rig({ key: null }),
      agent(),
      AGENT,
      'not_found',
      undefined,
      ['chain', 'identity', 'policy asked for the agent', 'key'],
    ],
    [
      'a client_tss key',
      () => rig({ key: { ...KEY, custody: 'client_tss' } }),
      agent(),
      AGENT,
      'client_tss_refused',
      undefined,
      ['chain', 'identity', 'policy asked for the agent', 'key'],
    ],
  ] as const)(
    'refuses %s at its place in the order, recorded <action>.refused with reason, status and field',
    async (_what, make, p, agentId, reason, field, steps) => {
      const r = make();
      const err = await refusal(r, p as Principal, agentId);
      expect(r.steps).toEqual(steps);
      expect(r.records).toEqual([
        {
          action: 'agent.sign.refused',
          resourceId: agentId === AGENT ? AGENT : null,
          metadata: { reason, status: err.httpStatus, ...(field ? { field } : {}) },
        },
      ]);
      expect(err.type === 'about:blank' ? err.kind : err.type).toBe(reason);
    },
  );

  it('names the chain field the request used (chain_id) in a 400 and its record', async () => {
    const r = rig({ chain: 'unknown' });
    const err = await refusal(r, agent(), AGENT, 'chain_id');
    expect(err.field).toBe('chain_id');
    expect(r.records[0]!.metadata).toMatchObject({ field: 'chain_id', status: 400 });
  });
});

describe('IntentContext.audited', () => {
  it('records no refusal for an outage (503) or a crash (500)', async () => {
    const r = rig();
    await expect(
      r.ctx.audited(agent(), 'agent.sign', AGENT, () => Promise.reject(new UnavailableError('down'))),
    ).rejects.toBeInstanceOf(UnavailableError);
    await expect(
      r.ctx.audited(agent(), 'agent.transaction', AGENT, () => Promise.reject(new Error('bug'))),
    ).rejects.toThrow('bug');
    expect(r.records).toEqual([]);
  });

  it('records a guardrail refusal with its reason_code and field, nothing of the request', async () => {
    const r = rig();
    const refused = new PermissionDeniedError('guardrail: 2 ETH is over tx_max_value 1 ETH', {
      type: 'guardrail_violation',
      field: 'tx_max_value',
      extensions: { reason_code: 'tx_max_value_exceeded' },
    });
    await expect(
      r.ctx.audited(agent(), 'agent.transaction', AGENT, () => Promise.reject(refused)),
    ).rejects.toBe(refused);
    expect(r.records).toEqual([
      {
        action: 'agent.transaction.refused',
        resourceId: AGENT,
        metadata: {
          reason: 'guardrail_violation',
          status: 403,
          field: 'tx_max_value',
          reason_code: 'tx_max_value_exceeded',
        },
      },
    ]);
  });

  it('answers 503 instead of the refusal when the refusal cannot be recorded', async () => {
    const r = rig({ failRecord: true });
    const err = await refusal(r, agent({ intentsApiEnabled: false }));
    expect(err.kind).toBe('unavailable');
  });
});

describe("the agent's vault policies' consensus triggers", () => {
  const rule = (n: number): ApprovalRule => ({
    conditions: [
      {
        type: 'always',
        chains: [],
        addresses: [],
        selectors: [],
        intentTypes: [],
        actions: [],
        actionKinds: [],
      },
    ],
    riskTier: n,
    skipWhen: [],
    requireWhen: [],
  });
  it('come after the agent’s own rules in the scope’s settings', async () => {
    const r = rig({ settings: { actionApprovalPolicy: { rules: [rule(1)] } }, triggers: [rule(2), rule(3)] });
    const scope = await r.ctx.open(agent(), AGENT, 'anvil');
    expect(scope.settings.actionApprovalPolicy!.rules.map((x) => x.riskTier)).toEqual([1, 2, 3]);
  });
  it('make a policy of an agent without one, and leave the agent alone when there are none', () => {
    const a = { id: AGENT } as Agent;
    expect(withTriggers(a, [rule(2)]).actionApprovalPolicy).toEqual({ rules: [rule(2)] });
    expect(withTriggers(a, [])).toBe(a);
  });
});
