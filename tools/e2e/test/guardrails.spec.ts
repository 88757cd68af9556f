import { randomBytes } from 'node:crypto';
import { JsonRpcProvider, getAddress } from 'ethers';
import { TronResponder } from '@custos/chain-responders/tron';
import { TronWeb } from 'tronweb';
import { waitFor } from '@custos/service-kit/testing';
import { api, expectProblem, quickUser } from '../src/api';
import { chainAgent, registerChain, submitTransaction } from '../src/chains';
import { sqlOn } from '../src/db';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 20: the agents' guardrails on the signing path, on the mesh's anvil (chain `anvil`, 31337).
// Each guardrail refuses in `enforce` (403 guardrail_violation with its reason_code, nothing sent,
// the refusal audited) and only records `guardrail_shadow.would_deny` in `log` (the transaction
// goes out); 20 parallel transactions against a daily cap broadcast exactly as many as fit; an
// EIP-712 domain of another chain is refused; the domain allowlist is judged.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;
type Agent = { id: string; token: string; address: string };

const ETH = 10n ** 18n;
const randomAddress = () => getAddress(`0x${randomBytes(20).toString('hex')}`);

const MAIL = {
  types: {
    Person: [
      { name: 'name', type: 'string' },
      { name: 'wallet', type: 'address' },
    ],
    Mail: [
      { name: 'from', type: 'Person' },
      { name: 'to', type: 'Person' },
      { name: 'contents', type: 'string' },
    ],
  },
  primaryType: 'Mail',
  domain: {
    name: 'Ether Mail',
    version: '1',
    chainId: 31337,
    verifyingContract: '0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC',
  },
  message: {
    from: { name: 'Cow', wallet: '0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826' },
    to: { name: 'Bob', wallet: '0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB' },
    contents: 'Hello, Bob!',
  },
};

describe('guardrails on the signing path (shared mesh, anvil)', () => {
  let mesh: Mesh;
  let chain: JsonRpcProvider;
  let owner: User;

  async function newAgent(settings: Body, funded = true): Promise<Agent> {
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: `guard-bot-${randomBytes(3).toString('hex')}`, intents_api_enabled: true, ...settings },
    });
    expect({ status: created.status, body: created.body }).toMatchObject({ status: 201 });
    const id = (created.body['agent'] as { id: string }).id;
    const key = await api(mesh, 'POST', `/v1/agents/${id}/signing-keys`, {
      token: owner.token,
      body: { chain: 'anvil' },
    });
    expect(key.status).toBe(201);
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: id, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    const address = key.body['address'] as string;
    if (funded) await fund(address);
    return { id, token: t.body['access_token'] as string, address };
  }

  const fund = (address: string) =>
    chain.send('anvil_setBalance', [address, `0x${(100n * ETH).toString(16)}`]);
  const submit = (a: Agent, body: Body) =>
    api(mesh, 'POST', `/v1/agents/${a.id}/transactions`, {
      token: a.token,
      body: { chain: 'anvil', ...body },
    });
  const sign = (a: Agent, body: Body) =>
    api(mesh, 'POST', `/v1/agents/${a.id}/sign`, { token: a.token, body: { chain: 'anvil', ...body } });

  /** signer's audit records of one action on an agent, as its outbox carries them. */
  async function records(action: string, agentId: string): Promise<Body[]> {
    const rows = await sqlOn<{ payload: Body }>(
      mesh,
      `SELECT payload FROM signer.outbox WHERE name = 'audit.recorded'
         AND payload->>'action' = $1 AND payload->>'resource_id' = $2 ORDER BY seq`,
      [action, agentId],
    );
    return rows.map((r) => r.payload);
  }
  const txCount = async (agentId: string) =>
    Number(
      (
        await sqlOn<{ n: string }>(
          mesh,
          `SELECT count(*)::text AS n FROM signer.transactions WHERE agent_id = $1`,
          [agentId],
        )
      )[0]!.n,
    );

  beforeAll(async () => {
    mesh = await sharedMesh();
    chain = new JsonRpcProvider(mesh.env['LOCAL_EVM_RPC_URL'], 31337, { staticNetwork: true });
    owner = await quickUser(mesh);
  });
  afterAll(() => {
    chain?.destroy();
    return mesh?.stop();
  });

  // Each guardrail: the agent's settings, a transaction that violates it, and what it answers.
  const OTHER = randomAddress();
  const cases: { name: string; settings: Body; body: Body; code: string; field: string }[] = [
    {
      name: 'tx_max_value_eth',
      settings: { tx_max_value_eth: '0.001' },
      body: { value: '0.01' },
      code: 'tx_max_value_exceeded',
      field: 'tx_max_value',
    },
    {
      name: 'per_chain_guardrails.max_value (stricter than the global one)',
      settings: { tx_max_value_eth: '1', per_chain_guardrails: { anvil: { max_value: '0.001' } } },
      body: { value: '0.01' },
      code: 'tx_max_value_exceeded',
      field: 'per_chain_guardrails.anvil.max_value',
    },
    {
      name: 'tx_daily_limit_eth',
      settings: { tx_daily_limit_eth: '0.005' },
      body: { value: '0.01' },
      code: 'tx_daily_limit_exceeded',
      field: 'tx_daily_limit',
    },
    {
      name: 'tx_max_per_day',
      settings: { tx_max_per_day: 0 },
      body: { value: '0.001' },
      code: 'tx_max_per_day_exceeded',
      field: 'tx_max_per_day',
    },
    {
      name: 'tx_to_allowlist',
      settings: { tx_to_allowlist: [OTHER] },
      body: { value: '0.001' },
      code: 'to_not_allowed',
      field: 'tx_to_allowlist',
    },
    {
      name: 'tx_allowed_chains',
      settings: { tx_allowed_chains: ['ethereum'] },
      body: { value: '0.001' },
      code: 'chain_not_allowed',
      field: 'tx_allowed_chains',
    },
    {
      name: 'per_chain_guardrails.gas_daily_budget_native',
      settings: { per_chain_guardrails: { anvil: { gas_daily_budget_native: '0.000001' } } },
      body: { value: '0.001' },
      code: 'gas_daily_budget_exceeded',
      field: 'per_chain_guardrails.anvil.gas_daily_budget_native',
    },
  ];

  describe.each(cases)('$name', ({ settings, body, code, field }) => {
    it(`enforce: 403 guardrail_violation ${code}, nothing recorded or sent, the refusal audited`, async () => {
      const a = await newAgent({ ...settings, execution_guardrails: { enforcement: 'enforce' } });
      const nonce = await chain.getTransactionCount(a.address, 'pending');
      const r = await submit(a, { to: randomAddress(), ...body });
      expectProblem(r, 403, { type: 'guardrail_violation', field });
      expect(r.body['reason_code']).toBe(code);
      expect(await txCount(a.id)).toBe(0);
      expect(await chain.getTransactionCount(a.address, 'pending')).toBe(nonce);
      const refused = await records('agent.transaction.refused', a.id);
      expect(refused.map((x) => x['metadata'])).toEqual([
        expect.objectContaining({ reason: 'guardrail_violation', field, status: 403 }),
      ]);
      expect(await records('guardrail_shadow.would_deny', a.id)).toEqual([]);
      const [ledger] = await sqlOn<{ n: number }>(
        mesh,
        `SELECT coalesce(sum(tx_count), 0)::int AS n FROM signer.guardrail_ledger WHERE agent_id = $1`,
        [a.id],
      );
      expect(ledger!.n).toBe(0);
    });

    it(`log: the transaction goes out, with guardrail_shadow.would_deny ${code}`, async () => {
      const a = await newAgent({ ...settings });
      const to = randomAddress();
      const r = await submit(a, { to, ...body });
      expect({ status: r.status, body: r.body }).toMatchObject({
        status: 201,
        body: { status: 'broadcast' },
      });
      const shadow = await records('guardrail_shadow.would_deny', a.id);
      expect(shadow.map((x) => x['metadata'])).toEqual([
        expect.objectContaining({
          reason_code: code,
          field,
          chain: 'anvil',
          intent: 'transaction',
          enforcement: 'log',
        }),
      ]);
      expect(await records('agent.transaction.refused', a.id)).toEqual([]);
    });
  });

  it('the would_deny record reaches the audit log (owners read it by action)', async () => {
    const a = await newAgent({ tx_max_value_eth: '0.0001' });
    const r = await submit(a, { to: randomAddress(), value: '0.001' });
    expect(r.status).toBe(201);
    const found = await waitFor(
      async () => {
        const e = await api(mesh, 'GET', '/v1/audit/events?limit=1000&action=guardrail_shadow.would_deny', {
          token: owner.token,
        });
        return (e.body['events'] as Body[] | undefined)?.find((x) => x['resource_id'] === a.id);
      },
      30_000,
      200,
    );
    expect(found).toMatchObject({
      actor_type: 'agent',
      actor_id: a.id,
      resource_type: 'agent',
      details: { reason_code: 'tx_max_value_exceeded', field: 'tx_max_value' },
    });
  });

  it('20 parallel transactions against a 0.05 daily cap: exactly 5 broadcast, 15 refused, the ledger at the cap', async () => {
    const a = await newAgent({
      tx_daily_limit_eth: '0.05',
      execution_guardrails: { enforcement: 'enforce' },
    });
    const start = await chain.getTransactionCount(a.address, 'pending');
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => submit(a, { to: randomAddress(), value: '0.01' })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(5).fill(201), ...Array(15).fill(403)]);
    for (const r of answers.filter((x) => x.status === 403)) {
      expect(r.body).toMatchObject({ type: 'guardrail_violation', reason_code: 'tx_daily_limit_exceeded' });
    }
    expect(answers.filter((x) => x.status === 201).every((x) => x.body['status'] === 'broadcast')).toBe(true);
    expect(await txCount(a.id)).toBe(5);
    const [ledger] = await sqlOn<{ value_spent: string; tx_count: number; day: string }>(
      mesh,
      `SELECT value_spent::text, tx_count, day FROM signer.guardrail_ledger WHERE agent_id = $1`,
      [a.id],
    );
    expect(ledger).toEqual({
      value_spent: (5n * (ETH / 100n)).toString(),
      tx_count: 5,
      day: new Date().toISOString().slice(0, 10),
    });
    await waitFor(
      async () => (await chain.getTransactionCount(a.address, 'latest')) === start + 5,
      30_000,
      100,
    );
    // The day is spent: one more wei is refused.
    expectProblem(await submit(a, { to: randomAddress(), value: '1' }), 403, { type: 'guardrail_violation' });
  });

  it('a transaction the node refuses (ends failed before the chain) gives its reservation back', async () => {
    const a = await newAgent(
      { tx_daily_limit_eth: '0.5', execution_guardrails: { enforcement: 'enforce' } },
      false,
    );
    const poor = await submit(a, { to: randomAddress(), value: '0.5' });
    expect({ status: poor.status, body: poor.body }).toMatchObject({
      status: 201,
      body: { status: 'failed' },
    });
    const [ledger] = await sqlOn<{ value_spent: string; tx_count: number }>(
      mesh,
      `SELECT value_spent::text, tx_count FROM signer.guardrail_ledger WHERE agent_id = $1`,
      [a.id],
    );
    expect(ledger).toEqual({ value_spent: '0', tx_count: 0 });
    const reservations = await sqlOn<{ released: boolean }>(
      mesh,
      `SELECT released_at IS NOT NULL AS released FROM signer.guardrail_reservations WHERE agent_id = $1`,
      [a.id],
    );
    expect(reservations).toEqual([{ released: true }]);
    // The day's room is whole again: funded now, the same amount goes out.
    await fund(a.address);
    const ok = await submit(a, { to: randomAddress(), value: '0.5' });
    expect({ status: ok.status, body: ok.body }).toMatchObject({
      status: 201,
      body: { status: 'broadcast' },
    });
  });

  it('a transaction an approval rule holds is judged before humans are asked: enforce refuses it, no approval', async () => {
    const policy = { rules: [{ conditions: [{ type: 'always' }], risk_tier: 1 }] };
    const a = await newAgent({
      action_approval_policy: policy,
      tx_max_value_eth: '0.001',
      execution_guardrails: { enforcement: 'enforce' },
    });
    const r = await submit(a, { to: randomAddress(), value: '0.01' });
    expectProblem(r, 403, { type: 'guardrail_violation', field: 'tx_max_value' });
    expect(await txCount(a.id)).toBe(0);
    const asked = await sqlOn<{ n: string }>(
      mesh,
      `SELECT count(*)::text AS n FROM approvals.approvals WHERE agent_id = $1`,
      [a.id],
    );
    expect(asked[0]!.n).toBe('0');
    // Within the limit it waits for a human as before, nothing reserved until it resumes.
    const held = await submit(a, { to: randomAddress(), value: '0.0001' });
    expect({ status: held.status, body: held.body }).toMatchObject({
      status: 202,
      body: { status: 'awaiting_approval' },
    });
    const [ledger] = await sqlOn<{ n: number }>(
      mesh,
      `SELECT coalesce(sum(tx_count), 0)::int AS n FROM signer.guardrail_ledger WHERE agent_id = $1`,
      [a.id],
    );
    expect(ledger!.n).toBe(0);
  });

  it('a sign-only transaction is judged and counted like a submitted one', async () => {
    const a = await newAgent({
      tx_daily_limit_eth: '0.01',
      execution_guardrails: { enforcement: 'enforce' },
    });
    const ok = await sign(a, { intent_type: 'transaction', to: randomAddress(), value: '0.01' });
    expect({ status: ok.status, body: ok.body }).toMatchObject({
      status: 200,
      body: { status: 'sign_only' },
    });
    const r = await sign(a, { intent_type: 'transaction', to: randomAddress(), value: '0.000001' });
    expectProblem(r, 403, { type: 'guardrail_violation', field: 'tx_daily_limit' });
    expect(r.body['reason_code']).toBe('tx_daily_limit_exceeded');
    expect((await records('agent.sign.refused', a.id)).map((x) => x['metadata'])).toEqual([
      expect.objectContaining({ reason: 'guardrail_violation', field: 'tx_daily_limit' }),
    ]);
  });

  describe('EIP-712 domains', () => {
    it('a domain whose chainId is another chain is refused, even when every domain is allowed', async () => {
      const a = await newAgent({ eip712_default_policy: 'allow' });
      const r = await sign(a, {
        intent_type: 'typed_data',
        typed_data: { ...MAIL, domain: { ...MAIL.domain, chainId: 1 } },
      });
      expectProblem(r, 400, { field: 'typed_data.domain.chainId' });
      expect(await records('agent.sign.typed_data', a.id)).toEqual([]);
      expect((await records('agent.sign.refused', a.id)).map((x) => x['metadata'])).toEqual([
        expect.objectContaining({ field: 'typed_data.domain.chainId' }),
      ]);
      const ok = await sign(a, { intent_type: 'typed_data', typed_data: MAIL });
      expect(ok.status).toBe(200);
      expect(await records('guardrail_shadow.would_deny', a.id)).toEqual([]);
    });

    it('enforce with eip712_default_policy deny: off the allowlist is 403, on it (by name or contract) is signed', async () => {
      const a = await newAgent({
        eip712_default_policy: 'deny',
        execution_guardrails: { enforcement: 'enforce' },
      });
      const r = await sign(a, { intent_type: 'typed_data', typed_data: MAIL });
      expectProblem(r, 403, { type: 'guardrail_violation', field: 'eip712_domain_allowlist' });
      expect(r.body['reason_code']).toBe('eip712_domain_not_allowed');
      expect(await records('agent.sign.typed_data', a.id)).toEqual([]);
      for (const entry of ['Ether Mail', MAIL.domain.verifyingContract.toLowerCase()]) {
        const b = await newAgent({
          eip712_default_policy: 'deny',
          eip712_domain_allowlist: [entry],
          execution_guardrails: { enforcement: 'enforce' },
        });
        const s = await sign(b, { intent_type: 'typed_data', typed_data: MAIL });
        expect({ status: s.status, body: s.body }).toMatchObject({
          status: 200,
          body: { intent_type: 'typed_data' },
        });
      }
    });

    it('log with eip712_default_policy deny: signed, with guardrail_shadow.would_deny', async () => {
      const a = await newAgent({ eip712_default_policy: 'deny' });
      const s = await sign(a, { intent_type: 'typed_data', typed_data: MAIL });
      expect(s.status).toBe(200);
      expect((await records('guardrail_shadow.would_deny', a.id)).map((x) => x['metadata'])).toEqual([
        expect.objectContaining({ reason_code: 'eip712_domain_not_allowed', intent: 'typed_data' }),
      ]);
    });
  });

  it('a non-EVM transfer (Tron, 6 decimals) is judged in its own major unit and counted per chain', async () => {
    const node = await TronResponder.start();
    try {
      node.produceBlock();
      const tron = await registerChain(mesh, { family: 'tron', network: 'nile', rpcUrl: node.url });
      const a = await chainAgent(mesh, tron, {
        tx_max_value_eth: '1',
        tx_daily_limit_eth: '2.5',
        execution_guardrails: { enforcement: 'enforce' },
      });
      node.fund(a.key['address'] as string, 500n * 1_000_000n);
      const to = () => TronWeb.address.fromPrivateKey(randomBytes(32).toString('hex')) as string;
      const big = await submitTransaction(mesh, a, { chain: tron, to: to(), value: '1.000001' });
      expect({ status: big.status, body: big.body }).toMatchObject({
        status: 403,
        body: { type: 'guardrail_violation', reason_code: 'tx_max_value_exceeded' },
      });
      // A decimal integer is the smallest unit (sun); a fraction is the major unit (TRX).
      for (const value of ['1.0', '1000000']) {
        const ok = await submitTransaction(mesh, a, { chain: tron, to: to(), value });
        expect({ status: ok.status, body: ok.body }).toMatchObject({ status: 201, body: { family: 'tron' } });
      }
      const over = await submitTransaction(mesh, a, { chain: tron, to: to(), value: '0.500001' });
      expect({ status: over.status, body: over.body }).toMatchObject({
        status: 403,
        body: {
          type: 'guardrail_violation',
          reason_code: 'tx_daily_limit_exceeded',
          field: 'tx_daily_limit',
        },
      });
      const fits = await submitTransaction(mesh, a, { chain: tron, to: to(), value: '0.5' });
      expect(fits.status).toBe(201);
      const rows = await sqlOn<{ chain_name: string; family: string; value_spent: string; tx_count: number }>(
        mesh,
        `SELECT chain_name, family, value_spent::text, tx_count FROM signer.guardrail_ledger WHERE agent_id = $1`,
        [a.id],
      );
      expect(rows).toEqual([{ chain_name: tron, family: 'tron', value_spent: '2500000', tx_count: 3 }]);
    } finally {
      await node.close();
    }
  });
});
